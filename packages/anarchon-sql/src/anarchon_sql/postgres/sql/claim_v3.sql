CREATE OR REPLACE FUNCTION {function}(
    p_job text, p_slot bigint, p_token text, p_instance text, p_lease_ms bigint,
    p_max_attempts integer, p_overlap boolean, p_deadline bigint, p_create boolean,
    p_early bigint, p_overlap_wait boolean,
    OUT out_kind text, OUT out_attempt integer, OUT out_runner text, OUT out_lease bigint,
    OUT out_token text)
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    t bigint;
    r record;
    b record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('{prefix}job:' || p_job, 0));
    t := {now};
    SELECT s.attempt, s.token, s.status, s.runner, s.lease_expires_at, s.started_at, s.released
      INTO r FROM {runs} AS s WHERE s.job = p_job AND s.slot = p_slot FOR UPDATE;
    IF NOT FOUND THEN
        out_attempt := 0;
        IF p_early IS NOT NULL AND p_slot > t + p_early THEN
            out_kind := 'early';
            RETURN;
        END IF;
        IF p_deadline IS NOT NULL AND t > p_deadline THEN
            out_kind := 'late';
            RETURN;
        END IF;
        IF NOT p_create THEN
            out_kind := 'none';
            RETURN;
        END IF;
        IF NOT p_overlap THEN
            SELECT s.runner, s.lease_expires_at INTO b FROM {runs} AS s
             WHERE s.job = p_job AND s.status = 'running' AND s.slot < p_slot
               AND s.lease_expires_at > t
             ORDER BY s.slot DESC LIMIT 1;
            IF FOUND AND p_overlap_wait THEN
                out_kind := 'overlap';
                out_runner := b.runner;
                out_lease := b.lease_expires_at;
                RETURN;
            END IF;
            IF FOUND THEN
                INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,
                                    lease_expires_at, started_at, finished_at, released)
                VALUES (p_job, p_slot, 0, p_max_attempts, p_token, 'skipped', p_instance,
                        t, t, t, 0);
                INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                                       started_at, finished_at, error, manual)
                VALUES (p_job, p_token, p_slot, 1, p_instance, 'skipped', 'overlap', t, t, NULL, 0)
                ON CONFLICT (job, slot, token) DO NOTHING;
                out_kind := 'overlap';
                out_runner := b.runner;
                out_lease := b.lease_expires_at;
                out_token := p_token;
                RETURN;
            END IF;
        END IF;
        INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,
                            lease_expires_at, started_at, finished_at, released)
        VALUES (p_job, p_slot, 1, p_max_attempts, p_token, 'running', p_instance,
                t + p_lease_ms, t, NULL, 0);
        INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)
        VALUES (p_job, p_token, p_slot, 1, p_instance, t, 0)
        ON CONFLICT (job, slot, token) DO NOTHING;
        out_kind := 'won';
        out_attempt := 1;
        out_runner := p_instance;
        out_lease := t + p_lease_ms;
        out_token := p_token;
        RETURN;
    END IF;
    out_token := r.token;
    IF r.token = p_token AND r.status = 'running' AND r.released = 0 THEN
        out_lease := greatest(r.lease_expires_at, t + p_lease_ms);
        IF out_lease <> r.lease_expires_at THEN
            UPDATE {runs} SET lease_expires_at = out_lease
             WHERE job = p_job AND slot = p_slot;
        END IF;
        out_kind := 'won';
        out_attempt := r.attempt;
        out_runner := r.runner;
        RETURN;
    END IF;
    out_attempt := r.attempt;
    out_runner := r.runner;
    out_lease := r.lease_expires_at;
    IF r.status <> 'running' OR r.token = p_token THEN
        out_kind := 'done';
        RETURN;
    END IF;
    IF r.lease_expires_at > t THEN
        out_kind := 'running';
        RETURN;
    END IF;
    IF r.attempt < p_max_attempts THEN
        IF r.released = 0 THEN
            INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                                   started_at, finished_at, error, manual)
            VALUES (p_job, r.token, p_slot, r.attempt, r.runner, 'interrupted', 'lease_lost',
                    r.started_at, greatest(r.lease_expires_at, r.started_at), NULL, 0)
            ON CONFLICT (job, slot, token) DO NOTHING;
        END IF;
        UPDATE {runs} SET attempt = r.attempt + 1, token = p_token, runner = p_instance,
               lease_expires_at = t + p_lease_ms, max_attempts = p_max_attempts,
               started_at = t, released = 0, end_reason = NULL
         WHERE job = p_job AND slot = p_slot;
        INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)
        VALUES (p_job, p_token, p_slot, r.attempt + 1, p_instance, t, 0)
        ON CONFLICT (job, slot, token) DO NOTHING;
        out_kind := 'won';
        out_attempt := r.attempt + 1;
        out_runner := p_instance;
        out_lease := t + p_lease_ms;
        out_token := p_token;
        RETURN;
    END IF;
    IF r.released = 0 THEN
        INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                               started_at, finished_at, error, manual)
        VALUES (p_job, r.token, p_slot, r.attempt, r.runner, 'interrupted',
                'attempts_exhausted', r.started_at, greatest(t, r.started_at), NULL, 0)
        ON CONFLICT (job, slot, token) DO NOTHING;
    END IF;
    UPDATE {runs} SET status = 'interrupted', finished_at = t
     WHERE job = p_job AND slot = p_slot;
    out_kind := 'done';
END
$anarchon$
