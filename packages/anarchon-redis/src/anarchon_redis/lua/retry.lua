-- KEYS: state, runs   ARGV: slot, token, new_token, instance, lease_ms, max_attempts
-- Returns {kind, attempt, runner, lease_expires_at}.
local state, runs, slot_s = KEYS[1], KEYS[2], ARGV[1]
local raw = redis.call('HGET', state, slot_s)
if not raw then return {'done', 0, '', 0} end
local r = decode_state(raw, state, slot_s)
if r.s == 'running' and r.x == 0 and r.t == ARGV[3] then
  put(state, slot_s, r)  -- a retried retry writes, so a WAIT after it has a write to wait for
  return {'won', r.a, r.r, r.l}
end
if r.s ~= 'running' or r.x ~= 0 then return {'done', r.a, r.r, r.l} end
if r.t ~= ARGV[2] then return {'running', r.a, r.r, r.l} end
if r.a >= tonumber(ARGV[6]) then return {'done', r.a, r.r, r.l} end
local now = now_ms()
r.a = r.a + 1
r.t, r.r, r.l, r.m, r.b, r.x, r.e = ARGV[3], ARGV[4], now + tonumber(ARGV[5]), tonumber(ARGV[6]), now, 0, nil
put(state, slot_s, r)
return {'won', r.a, r.r, r.l}
