-- KEYS: per run: state   ARGV: per run: slot, token, status
-- Returns per run 1 if it is now finished by this token (also for a retried finish),
-- 2 if it had no state and a finished one was written for this token, else 0.
local out = {}
for i = 1, #KEYS do
  local a = (i - 1) * 3
  out[i] = finish(KEYS[i], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
end
return out
