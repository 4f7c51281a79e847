        UPDATE {runs} SET status = 'finished', finished_at = {now},
               outcome = {arrays}_statuses[i], error = {arrays}_errors[i]
         WHERE job = {job} AND slot = {slot} AND token = {token}
           AND status = 'running' AND released = 0;
        out_ok := FOUND;
        out_healed := FALSE;
        IF NOT out_ok THEN
            INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,
                                lease_expires_at, started_at, finished_at, released,
                                outcome, error)
            VALUES ({job}, {slot}, 1, 1, {token}, 'finished', '', {now}, {now}, {now}, 0,
                    {arrays}_statuses[i], {arrays}_errors[i])
            ON CONFLICT (job, slot) DO NOTHING;
            out_healed := FOUND;
            out_ok := out_healed OR EXISTS (SELECT 1 FROM {runs} AS s WHERE s.job = {job}
                               AND s.slot = {slot} AND s.token = {token}
                               AND s.status = 'finished');
        END IF;
