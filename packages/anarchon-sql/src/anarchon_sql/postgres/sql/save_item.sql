        INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                               started_at, finished_at, error, manual)
        VALUES (p_jobs[i], p_tokens[i], p_slots[i], p_attempts[i], p_instances[i],
                p_statuses[i], p_reasons[i], p_started[i], p_finished[i], p_errors[i],
                p_manual[i])
        ON CONFLICT (job, slot, token) DO UPDATE SET slot = excluded.slot,
            attempt = excluded.attempt, instance_id = excluded.instance_id,
            status = excluded.status, reason = excluded.reason,
            started_at = excluded.started_at, finished_at = excluded.finished_at,
            error = excluded.error, manual = excluded.manual;
        INSERT INTO {jobs} AS j (job, saves) VALUES (p_jobs[i], 1)
        ON CONFLICT (job) DO UPDATE SET saves = j.saves + 1
        RETURNING j.saves INTO saves;
        size := greatest(p_sizes[i], 1);
        IF saves % greatest(size / 2, 1) = 0 THEN
            SELECT r.slot INTO cut FROM {results} AS r WHERE r.job = p_jobs[i]
             ORDER BY r.slot DESC LIMIT 1 OFFSET size - 1;
            IF FOUND THEN
                DELETE FROM {results} WHERE job = p_jobs[i] AND slot < cut AND {keep_results};
                DELETE FROM {claims} WHERE job = p_jobs[i] AND slot < cut AND {keep_claims};
                IF p_retention[i] IS NOT NULL THEN
                    DELETE FROM {runs} WHERE job = p_jobs[i] AND slot < cut
                       AND status <> 'running' AND slot < {now} - p_retention[i];
                END IF;
            END IF;
        END IF;
        IF p_ttls[i] IS NOT NULL THEN
            DELETE FROM {results} WHERE job = p_jobs[i] AND slot < {now} - p_ttls[i]
               AND {keep_results};
            DELETE FROM {claims} WHERE job = p_jobs[i] AND slot < {now} - p_ttls[i]
               AND {keep_claims};
        END IF;
