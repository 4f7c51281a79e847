CREATE OR REPLACE FUNCTION {function}({finish_arrays},{save_arrays},
    OUT out_i integer, OUT out_ok boolean, OUT out_healed boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;{save_locals}
BEGIN{each_item}
        out_i := i;{finish_item}
        IF out_ok THEN{save_item}
        END IF;
        RETURN NEXT;
    END LOOP;
END
$anarchon$
