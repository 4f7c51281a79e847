-- KEYS: state, legacy active set   Returns {now, slot, attempt, runner, lease, token, ...}
-- (unfinished runs: those `~act` lists, and any in the set a previous release kept).
-- `~act` or a set member that is not a slot is foreign data.
local out = {now_ms()}
local seen = {}
local slots = {}
for s in string.gmatch(act_check(redis.call('HGET', KEYS[1], '~act'), KEYS[1]), '[^,]+') do
  if not seen[s] then seen[s] = true; slots[#slots + 1] = s end
end
for _, s in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not whole(s) then foreign(KEYS[2], s, 'is not a slot') end
  if not seen[s] then seen[s] = true; slots[#slots + 1] = s end
end
for _, s in ipairs(slots) do
  local raw = redis.call('HGET', KEYS[1], s)
  if raw then
    local r = decode_state(raw, KEYS[1], s)
    if r.s == 'running' then
      out[#out + 1] = s
      out[#out + 1] = r.a
      out[#out + 1] = r.r
      out[#out + 1] = r.l
      out[#out + 1] = r.t
    end
  end
end
return out
