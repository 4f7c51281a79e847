-- release(): ends the token's lease now (a backup takes over at its next
-- re-check); on the last attempt the run is interrupted instead. 1 also for
-- a retried release.
local function release(state, results, slot_s, token)
  local got = redis.call('HMGET', state, slot_s, '~act')
  local raw = got[1]
  if not raw then return 0 end
  local r = decode_state(raw, state, slot_s)
  if r.t ~= token then return 0 end
  if r.s ~= 'running' or r.x ~= 0 then
    if r.e == 'handed_over' then return 1 end
    return 0
  end
  local now = now_ms()
  add_result(results, tonumber(slot_s), r.t, r.r, 'interrupted', r.b, math.max(now, r.b), r.a,
             'handed_over')
  r.e = 'handed_over'
  if r.a >= r.m then
    r.s, r.f = 'interrupted', now
    redis.call('HSET', state, slot_s, encode_state(r), '~act', act_del(got[2], slot_s, state))
  else
    r.l, r.x = now, 1
    put(state, slot_s, r)
  end
  return 1
end
