-- KEYS: runs   ARGV: duration_sec, max_size   Returns 1 if the stream was created.
return create(KEYS[1], ARGV[1], ARGV[2])
