-- A finish and its result in one step per run: the result is stored only if
-- this token finished the run (a retry stores the same member again).
-- KEYS: per run: state, results   ARGV: per run: slot, token, status, result (JSON)
-- Returns per run 1 if it is now finished by this token, 2 if it had no state
-- (a finished one was written for this token), else 0.
local out = {}
for i = 1, #KEYS / 2 do
  local k, a = (i - 1) * 2, (i - 1) * 4
  local slot_s = ARGV[a + 1]
  local done = finish(KEYS[k + 1], slot_s, ARGV[a + 2], ARGV[a + 3])
  if done ~= 0 then redis.call('ZADD', KEYS[k + 2], slot_s, ARGV[a + 4]) end
  out[i] = done
end
return out
