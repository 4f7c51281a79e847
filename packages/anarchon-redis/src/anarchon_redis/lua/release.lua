-- KEYS: state, results   ARGV: slot, token   Returns 1 if released (also for a retry).
return release(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
