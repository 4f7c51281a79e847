CREATE OR REPLACE FUNCTION {function}(
    p_jobs text[], p_slots bigint[], p_tokens text[], p_instances text[], p_lease_ms bigint[],
    p_max_attempts integer[], p_overlap boolean[], p_deadlines bigint[], p_create boolean[],
    p_early bigint[], p_overlap_wait boolean[],
    OUT out_i integer, OUT out_kind text, OUT out_attempt integer, OUT out_runner text,
    OUT out_lease bigint, OUT out_token text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
    c record;
    r record;
    t bigint;
BEGIN
    FOR i IN
        SELECT u.i FROM generate_subscripts(p_jobs, 1) AS u(i)
         ORDER BY hashtextextended('{prefix}job:' || p_jobs[u.i], 0), u.i
    LOOP
        out_i := i;
        PERFORM pg_advisory_xact_lock(hashtextextended('{prefix}job:' || p_jobs[i], 0));
        t := {now};
        SELECT s.attempt, s.token, s.status, s.runner, s.lease_expires_at, s.released
          INTO r FROM {runs} AS s WHERE s.job = p_jobs[i] AND s.slot = p_slots[i];
        IF FOUND AND NOT (r.token = p_tokens[i] AND r.status = 'running' AND r.released = 0)
           AND (r.status <> 'running' OR r.token = p_tokens[i] OR r.lease_expires_at > t) THEN
            out_attempt := r.attempt;
            out_runner := r.runner;
            out_lease := r.lease_expires_at;
            out_token := r.token;
            IF r.status <> 'running' OR r.token = p_tokens[i] THEN
                out_kind := 'done';
            ELSE
                out_kind := 'running';
            END IF;
            RETURN NEXT;
            CONTINUE;
        END IF;
        SELECT * INTO c FROM {claim_function}(
            p_jobs[i], p_slots[i], p_tokens[i], p_instances[i], p_lease_ms[i],
            p_max_attempts[i], p_overlap[i], p_deadlines[i], p_create[i],
            p_early[i], p_overlap_wait[i]);
        out_kind := c.out_kind;
        out_attempt := c.out_attempt;
        out_runner := c.out_runner;
        out_lease := c.out_lease;
        out_token := c.out_token;
        RETURN NEXT;
    END LOOP;
END
$anarchon$
