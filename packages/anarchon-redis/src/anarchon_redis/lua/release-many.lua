-- KEYS: per run: state, results   ARGV: per run: slot, token
-- Returns per run 1 if released (also for a retried release).
local out = {}
for i = 1, #KEYS / 2 do
  out[i] = release(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
end
return out
