CREATE OR REPLACE FUNCTION {function}({save_arrays})
RETURNS integer
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
    n integer := 0;{save_locals}
BEGIN{each_item}
        IF p_manual[i] = 0 AND p_statuses[i] <> 'running' THEN
            UPDATE {runs} SET status = 'finished', finished_at = {now}, outcome = p_statuses[i],
                   error = p_errors[i]
             WHERE job = p_jobs[i] AND slot = p_slots[i] AND token = p_tokens[i]
               AND status = 'running';
        END IF;{save_item}
        n := n + 1;
    END LOOP;
    RETURN n;
END
$anarchon$
