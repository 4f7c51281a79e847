        UPDATE {runs} SET status = 'finished', finished_at = {now},
               outcome = {arrays}_statuses[i], error = {arrays}_errors[i]
         WHERE job = {job} AND slot = {slot} AND token = {token}
           AND status = 'running' AND released = 0;
        out_ok := FOUND;
        IF NOT out_ok THEN
            out_ok := EXISTS (SELECT 1 FROM {runs} AS s WHERE s.job = {job}
                               AND s.slot = {slot} AND s.token = {token}
                               AND s.status = 'finished');
        END IF;
