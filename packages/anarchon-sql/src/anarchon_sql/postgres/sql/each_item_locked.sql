    FOR i IN
        SELECT u.i FROM generate_subscripts({jobs}, 1) AS u(i)
         ORDER BY hashtextextended('{prefix}job:' || {jobs}[u.i], 0), {order}
    LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('{prefix}job:' || {jobs}[i], 0));
