CREATE OR REPLACE FUNCTION {function}(
    p_lease_ms bigint, p_jobs text[], p_slots bigint[], p_tokens text[],
    OUT out_i integer, OUT out_ok boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
BEGIN
    PERFORM {synchronous};
    RETURN QUERY SELECT h.out_i, h.out_ok
                   FROM {heartbeat_many_function}(p_lease_ms, p_jobs, p_slots, p_tokens) AS h;
END
$anarchon$
