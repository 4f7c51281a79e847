-- KEYS: per run: state   ARGV: lease_ms, then per run: slot, token
-- Returns per run 1 if the lease was extended.
local lease = now_ms() + tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local state, slot_s, token = KEYS[i], ARGV[2 * i], ARGV[2 * i + 1]
  out[i] = 0
  local raw = redis.call('HGET', state, slot_s)
  if raw then
    local r = decode_state(raw, state, slot_s)
    if r.t == token and r.s == 'running' and r.x == 0 then
      r.l = lease
      put(state, slot_s, r)
      out[i] = 1
    end
  end
end
return out
