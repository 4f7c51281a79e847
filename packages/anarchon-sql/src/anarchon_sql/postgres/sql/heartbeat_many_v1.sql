CREATE OR REPLACE FUNCTION {function}(
    p_lease_ms bigint, p_jobs text[], p_slots bigint[], p_tokens text[],
    OUT out_i integer, OUT out_ok boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
BEGIN{each_item}
        UPDATE {runs} SET lease_expires_at = {now} + p_lease_ms
         WHERE job = p_jobs[i] AND slot = p_slots[i] AND token = p_tokens[i]
           AND status = 'running' AND released = 0;
        out_i := i;
        out_ok := FOUND;
        RETURN NEXT;
    END LOOP;
END
$anarchon$
