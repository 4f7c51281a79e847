CREATE OR REPLACE FUNCTION {function}({params},
    OUT out_i integer, OUT out_ok boolean, OUT out_healed boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    c record;
    w integer;
BEGIN
    PERFORM {synchronous};
    FOR c IN SELECT * FROM {base_function}({args})
    LOOP
        out_i := c.out_i;
        out_ok := c.out_ok;
        out_healed := c.out_healed;
        IF c.out_ok THEN
            w := c.out_i;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF w IS NOT NULL AND txid_current_if_assigned() IS NULL THEN
        UPDATE {runs} SET finished_at = finished_at
         WHERE job = {arrays}_jobs[w] AND slot = {arrays}_slots[w] AND token = {arrays}_tokens[w];
    END IF;
END
$anarchon$
