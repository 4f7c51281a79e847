-- KEYS: state, legacy active set, legacy slots index   ARGV: keep_ms ('' = unknown)
-- Remember the longest time any instance needs run state kept. A store written
-- by a release before `~act` is upgraded: the runs its `active` set lists that
-- are still running join `~act`, and the set and the `slots` index are dropped.
-- A `~keep` that is not a number is foreign data, also when this instance has none to give.
local state = KEYS[1]
local stored = stored_number(redis.call('HGET', state, '~keep'), state, '~keep') or 0
if ARGV[1] ~= '' and tonumber(ARGV[1]) > stored then redis.call('HSET', state, '~keep', ARGV[1]) end
if redis.call('EXISTS', KEYS[2]) == 1 then
  local act = redis.call('HGET', state, '~act') or ''
  for _, s in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if not whole(s) then foreign(KEYS[2], s, 'is not a slot') end
    local raw = redis.call('HGET', state, s)
    if raw and decode_state(raw, state, s).s == 'running' then act = act_add(act, s, state) end
  end
  redis.call('HSET', state, '~act', act)
  redis.call('DEL', KEYS[2])
end
redis.call('DEL', KEYS[3])
return 1
