-- A batch of claims, each walking the claim tree on its own (in order, as if
-- sent one by one), all at one server time.
-- KEYS: per claim: state, runs, results (3 keys)
-- ARGV: the number of profiles P, then P profiles of 10: instance, lease_ms,
--       max_attempts, overlap (0/1), create (0/1), history_size, keep_ms,
--       history_ttl_ms ('' = none), early_ms ('' = none), overlap_wait (0/1: an
--       overlap answer writes nothing);
--       then per claim: slot, token, deadline ('' = none), profile (1..P)
-- Returns per claim {kind, attempt, runner, lease_expires_at, stored token is ours (0/1)},
-- or, for the common answer (won, attempt 1, this claim's instance), only the
-- lease's end as an integer.
-- A claim reads the run's state and the bookkeeping fields in one HMGET; a
-- won claim writes state, `~act` and `~n` in one HSET: the run's state is its
-- claim record (history reads the runs `~act` lists). Trimming comes before
-- that write, so garbage it finds ends the script before the claim wrote.
local now = now_ms()
local now_s = int(now)
local profiles = {}
local np = tonumber(ARGV[1])
for p = 1, np do
  local b = 1 + (p - 1) * 10
  local lease_ms = tonumber(ARGV[b + 2])
  profiles[p] = {instance = ARGV[b + 1], jinstance = jstr(ARGV[b + 1]), lease_ms = lease_ms,
                 lease_s = int(now + lease_ms), lease_end = now + lease_ms,
                 max_s = ARGV[b + 3], max = tonumber(ARGV[b + 3]),
                 overlap = ARGV[b + 4] == '1', create = ARGV[b + 5] == '1',
                 size = tonumber(ARGV[b + 6]), keep = tonumber(ARGV[b + 7]),
                 ttl = opt(ARGV[b + 8]), early = opt(ARGV[b + 9]), wait = ARGV[b + 10] == '1'}
end

-- The bookkeeping fields a write needs, read with the run's state:
-- `~act`, the next `~n`, `~ttl` (each checked: garbage is foreign data).
local function bookkeeping(state, got)
  return act_check(got[2], state), (stored_number(got[3], state, '~n') or 0) + 1,
    stored_number(got[4], state, '~ttl') or 0
end

local function claim(k, slot_s, token, deadline, p)
  local state, runs, results = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local slot, instance, max_attempts = tonumber(slot_s), p.instance, p.max
  local got = redis.call('HMGET', state, slot_s, '~act', '~n', '~ttl')
  local raw = got[1]
  if not raw then
    local act, count, ttl_due = bookkeeping(state, got)
    local function trim(new_act)
      tick(state, runs, results, now, p.size, p.keep, p.ttl, count, ttl_due, new_act)
    end
    if p.early and slot > now + p.early then return {'early', 0, '', 0, 0} end
    if deadline and now > deadline then return {'late', 0, '', 0, 0} end
    if not p.create then return {'none', 0, '', 0, 0} end
    if not p.overlap and act ~= '' then
      local blocker, blocker_slot = nil, nil
      for s in string.gmatch(act, '[^,]+') do
        local n = tonumber(s)
        if n < slot and (blocker_slot == nil or n > blocker_slot) then
          local other = redis.call('HGET', state, s)
          if other then
            local o = decode_state(other, state, s)
            if o.s == 'running' and o.l > now then blocker, blocker_slot = o, n end
          end
        end
      end
      if blocker then
        if p.wait then return {'overlap', 0, blocker.r, blocker.l, 0} end
        trim(act)
        redis.call('HSET', state, slot_s,
                   encode_state({a = 0, t = token, s = 'skipped', r = instance, l = now, b = now,
                                 m = max_attempts, x = 0, f = now}), '~n', count)
        add_result(results, slot, token, instance, 'skipped', now, now, 1, 'overlap')
        return {'overlap', 0, blocker.r, blocker.l, 0}
      end
    end
    -- encode_state's layout, from strings made once per call.
    local new_act = act_add(act, slot_s, state)
    trim(new_act)
    redis.call('HSET', state, slot_s,
               '{"a":1,"t":' .. jstr(token) .. ',"s":"running","r":' .. p.jinstance .. ',"l":'
                 .. p.lease_s .. ',"b":' .. now_s .. ',"m":' .. p.max_s .. ',"x":0}',
               '~act', new_act, '~n', count)
    return p.lease_end
  end
  local r = decode_state(raw, state, slot_s)
  local mine = 0
  if r.t == token then mine = 1 end
  if mine == 1 and r.s == 'running' and r.x == 0 then
    -- Written even when unchanged: a WAIT after a retried claim needs a write.
    r.l = math.max(r.l, now + p.lease_ms)
    put(state, slot_s, r)
    return {'won', r.a, r.r, r.l, 1}
  end
  if r.s ~= 'running' or mine == 1 then return {'done', r.a, r.r, r.l, mine} end
  if r.l > now then return {'running', r.a, r.r, r.l, 0} end
  local act, count, ttl_due = bookkeeping(state, got)
  if r.a < max_attempts then
    local new_act = act_add(act, slot_s, state)
    tick(state, runs, results, now, p.size, p.keep, p.ttl, count, ttl_due, new_act)
    if r.x == 0 then
      add_result(results, slot, r.t, r.r, 'interrupted', r.b, math.max(r.l, r.b), r.a, 'lease_lost')
    end
    r.a = r.a + 1
    r.t, r.r, r.l, r.m, r.b, r.x, r.e = token, instance, now + p.lease_ms, max_attempts, now, 0, nil
    redis.call('HSET', state, slot_s, encode_state(r), '~act', new_act, '~n', count)
    return {'won', r.a, instance, r.l, 1}
  end
  if r.x == 0 then
    add_result(results, slot, r.t, r.r, 'interrupted', r.b, math.max(now, r.b), r.a,
               'attempts_exhausted')
  end
  r.s, r.f = 'interrupted', now
  redis.call('HSET', state, slot_s, encode_state(r), '~act', act_del(act, slot_s, state))
  return {'done', r.a, r.r, r.l, 0}
end

local out = {}
local base = 1 + np * 10
for i = 1, #KEYS / 3 do
  local a = base + (i - 1) * 4
  out[i] = claim((i - 1) * 3, ARGV[a + 1], ARGV[a + 2], opt(ARGV[a + 3]),
                 profiles[tonumber(ARGV[a + 4])])
end
return out
