-- KEYS: per result: state, runs, results
-- ARGV: the number of profiles P, then P profiles of 3: history_size,
--       history_ttl_ms ('' = none), keep_ms;
--       then per result: slot, token, result (JSON), status, kind, profile (1..P);
--       kind: 0 a scheduled run, 1 a manual run, 2 a run this token finished already
-- A plain claim's run state is marked finished too. Returns per result 1.
-- A lease run this instance finished costs one ZADD.
local now = now_ms()
local np = tonumber(ARGV[1])
local base = 1 + np * 3

local function save(k, a)
  local state, runs, results = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local slot_s, token, status, kind = ARGV[a + 1], ARGV[a + 2], ARGV[a + 4], ARGV[a + 5]
  if kind == '0' and status ~= 'running' then
    local raw = redis.call('HGET', state, slot_s)
    -- Only a run still running is decoded (a lease run was finished already).
    if raw and string.find(raw, '"s":"running"', 1, true) then
      local r = decode_state(raw, state, slot_s)
      if r.t == token and r.s == 'running' then
        r.s, r.f, r.o = 'finished', now, status
        local act = act_del(redis.call('HGET', state, '~act'), slot_s, state)
        redis.call('HSET', state, slot_s, encode_state(r), '~act', act)
      end
    end
  end
  -- A scheduled run's claim counted already (it ticks, and trims results too);
  -- a manual run has no claim here, so its result counts. Its bookkeeping is
  -- read (and trimmed) before anything is written.
  if kind == '1' then
    local p = 1 + (tonumber(ARGV[a + 6]) - 1) * 3
    local got = redis.call('HMGET', state, '~n', '~ttl', '~act')
    local count = (stored_number(got[1], state, '~n') or 0) + 1
    tick(state, runs, results, now, tonumber(ARGV[p + 1]), tonumber(ARGV[p + 3]),
         opt(ARGV[p + 2]), count, stored_number(got[2], state, '~ttl') or 0, got[3])
    redis.call('HSET', state, '~n', count)
  end
  redis.call('ZADD', results, slot_s, ARGV[a + 3])
  return 1
end

local out = {}
for i = 1, #KEYS / 3 do
  out[i] = save((i - 1) * 3, base + (i - 1) * 6)
end
return out
