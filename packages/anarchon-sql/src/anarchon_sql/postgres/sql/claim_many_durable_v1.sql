CREATE OR REPLACE FUNCTION {function}(
    p_jobs text[], p_slots bigint[], p_tokens text[], p_instances text[], p_lease_ms bigint[],
    p_max_attempts integer[], p_overlap boolean[], p_deadlines bigint[], p_create boolean[],
    p_early bigint[], p_overlap_wait boolean[],
    OUT out_i integer, OUT out_kind text, OUT out_attempt integer, OUT out_runner text,
    OUT out_lease bigint, OUT out_token text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    c record;
    w integer;
BEGIN
    PERFORM {synchronous};
    FOR c IN SELECT * FROM {claim_many_function}(p_jobs, p_slots, p_tokens, p_instances,
                             p_lease_ms, p_max_attempts, p_overlap, p_deadlines, p_create,
                             p_early, p_overlap_wait)
    LOOP
        out_i := c.out_i;
        out_kind := c.out_kind;
        out_attempt := c.out_attempt;
        out_runner := c.out_runner;
        out_lease := c.out_lease;
        out_token := c.out_token;
        IF c.out_kind = 'won' THEN
            w := c.out_i;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF w IS NOT NULL AND txid_current_if_assigned() IS NULL THEN
        UPDATE {runs} SET lease_expires_at = lease_expires_at
         WHERE job = p_jobs[w] AND slot = p_slots[w] AND token = p_tokens[w];
    END IF;
END
$anarchon$
