CREATE OR REPLACE FUNCTION {function}({finish_arrays},
    OUT out_i integer, OUT out_ok boolean, OUT out_healed boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
BEGIN{each_item}
        out_i := i;{finish_item}
        RETURN NEXT;
    END LOOP;
END
$anarchon$
