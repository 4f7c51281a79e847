    p_jobs text[], p_tokens text[], p_slots bigint[], p_attempts integer[], p_instances text[],
    p_statuses text[], p_reasons text[], p_started bigint[], p_finished bigint[], p_errors text[],
    p_manual integer[], p_sizes integer[], p_ttls bigint[], p_retention bigint[]
