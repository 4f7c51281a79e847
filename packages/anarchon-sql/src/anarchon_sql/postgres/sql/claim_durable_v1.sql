CREATE OR REPLACE FUNCTION {function}(
    p_job text, p_slot bigint, p_token text, p_instance text, p_lease_ms bigint,
    p_max_attempts integer, p_overlap boolean, p_deadline bigint, p_create boolean,
    p_early bigint, p_overlap_wait boolean,
    OUT out_kind text, OUT out_attempt integer, OUT out_runner text, OUT out_lease bigint,
    OUT out_token text)
LANGUAGE plpgsql VOLATILE AS $anarchon$
BEGIN
    PERFORM {synchronous};
    SELECT c.out_kind, c.out_attempt, c.out_runner, c.out_lease, c.out_token
      INTO out_kind, out_attempt, out_runner, out_lease, out_token
      FROM {claim_function}(p_job, p_slot, p_token, p_instance, p_lease_ms, p_max_attempts,
                            p_overlap, p_deadline, p_create, p_early, p_overlap_wait) AS c;
    IF out_kind = 'won' AND txid_current_if_assigned() IS NULL THEN
        UPDATE {runs} SET lease_expires_at = lease_expires_at
         WHERE job = p_job AND slot = p_slot AND token = p_token;
    END IF;
END
$anarchon$
