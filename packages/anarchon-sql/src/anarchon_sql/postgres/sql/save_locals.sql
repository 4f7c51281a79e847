    saves bigint;
    size integer;
    cut bigint;
