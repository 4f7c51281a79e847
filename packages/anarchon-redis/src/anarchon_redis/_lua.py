"""The Lua scripts, run with ``EVALSHA`` (Redis 5+, Valkey).

``lease`` scripts touch only the keys of one job, which share the hash tag
``{<prefix><job>}``; they read the server clock with ``TIME`` (allowed before
writes since Redis 5, where scripts replicate by their effects). Claim-only
scripts touch one key each.

Run state lives in the ``state`` hash, one field per slot, as a small JSON
object (``cjson``) with these keys:

====  =========================================================
``a``  attempt (0 for a skipped slot)
``t``  token of the current attempt
``s``  status: ``running``, ``finished``, ``interrupted``, ``skipped``
``r``  runner (instance id of the current attempt)
``l``  lease expiry (server ms)
``b``  start of the current attempt (server ms)
``m``  max_attempts of the claim that started it
``x``  1 once released (hand-over), else 0
``e``  end reason (``handed_over``), when released
``f``  finish time (server ms), once ended
``o``  outcome given to ``finish`` (``ok``, ``error``, ...)
====  =========================================================

Bookkeeping fields sit beside the slots: ``~act`` (the slots of runs not
ended yet, comma-separated, written in the same ``HSET`` as the run's state),
``~n`` (writes so far, written the same way: trimming is checked every
``min(16, history_size)`` writes, not on each), ``~keep`` (the longest any
instance asked run state to be kept, ms), ``~ttl`` (when history is next
checked against ``history_ttl``) and ``~st`` (when run state may next be
trimmed, once every candidate was still needed). A won claim is one ``HGET``,
one ``HMGET`` and one ``HSET``, a losing one an ``HGET``; a finish one
``HMGET`` and one ``HSET``; a result one ``ZADD`` (the scheduler sends a
finish and its result in one ``finish-save`` call) (and one ``HGET`` unless
the saving instance finished the run). As
``~act`` is rewritten whole, a write costs O(runs in progress of the job):
nothing for the usual one or two, noticeable for a job with thousands.

Every lease script but ``release``, ``active`` and ``prepare`` takes a batch:
KEYS and ARGV hold one group per item, items run in order at one ``TIME``,
and the reply is one answer per item. The claim and save scripts take the
settings items share once per call (profiles, see ``run_batched``).

Results are JSON objects in the ``results`` sorted set, scored by slot. A
scheduled run's claim record is its run state (history reads the runs
``~act`` lists); the ``runs`` stream holds manual runs, and the claims
releases up to 0.1.0 appended (an entry per attempt, first field the slot).
"""

from __future__ import annotations

from anarchon_redis._client import LuaScript

__all__ = [
    "IDMP_CLAIM",
    "IDMP_PREPARE",
    "IDMP_SCRIPTS",
    "LEASE_ACTIVE",
    "LEASE_CLAIM",
    "LEASE_FINISH",
    "LEASE_FINISH_SAVE",
    "LEASE_HEARTBEAT",
    "LEASE_LIB",
    "LEASE_PREPARE",
    "LEASE_RELEASE",
    "LEASE_RELEASE_MANY",
    "LEASE_SAVE",
    "LEASE_SCRIPTS",
    "PRELUDE",
    "SCRIPT_CLAIM",
    "SCRIPT_SCRIPTS",
    "SET_MAX",
    "STATE_LIB",
    "STREAM_ID_SCRIPTS",
    "TRIM_DEDUPE",
    "TRIM_STREAM",
]

_PRELUDE = r"""
if redis.replicate_commands then pcall(redis.replicate_commands) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(n) return string.format('%d', n) end
local function opt(s) if s == nil or s == '' then return nil end return tonumber(s) end
"""

_STATE = r"""
-- Run state as the JSON cjson would write, built with string.format (faster than
-- cjson.encode of a table); strings other than [%w.:_-] go through cjson.
local function jstr(s)
  if string.find(s, '^[%w%.:_%-]*$') then return '"' .. s .. '"' end
  return cjson.encode(s)
end
local function encode_state(r)
  local out = string.format('{"a":%d,"t":%s,"s":%s,"r":%s,"l":%d,"b":%d,"m":%d,"x":%d',
                            r.a, jstr(r.t), jstr(r.s), jstr(r.r), r.l, r.b, r.m, r.x)
  if r.f then out = out .. string.format(',"f":%d', r.f) end
  if r.e then out = out .. ',"e":' .. jstr(r.e) end
  if r.o then out = out .. ',"o":' .. jstr(r.o) end
  return out .. '}'
end
local decode_state = cjson.decode
-- A token or status that can stand in JSON as it is (no quote or backslash):
-- then a stored state can be matched and rewritten with plain string search.
local function plain(s) return not string.find(s, '[\\"]') end
local function put(state, slot, r) redis.call('HSET', state, slot, encode_state(r)) end

-- `~act` lists the slots of runs not ended yet, comma-separated: it is written
-- in the same HSET as the run's state, so it costs no command of its own.
local function act_has(act, slot_s)
  if not act or act == '' then return false end
  return string.find(',' .. act .. ',', ',' .. slot_s .. ',', 1, true) ~= nil
end
local function act_add(act, slot_s)
  if not act or act == '' then return slot_s end
  if act_has(act, slot_s) then return act end
  return act .. ',' .. slot_s
end
local function act_del(act, slot_s)
  if not act or act == '' then return '' end
  local out = {}
  for s in string.gmatch(act, '[^,]+') do
    if s ~= slot_s then out[#out + 1] = s end
  end
  return table.concat(out, ',')
end
local function act_set(act)
  local running, n = {}, 0
  if act and act ~= '' then
    for s in string.gmatch(act, '[^,]+') do
      running[tonumber(s)] = true
      n = n + 1
    end
  end
  return running, n
end
"""

_LEASE_LIB = r"""
local function add_result(results, slot, token, runner, status, started, finished, attempt, reason)
  local r = {slot = slot, token = token, instance_id = runner, status = status,
             started_at = started, finished_at = finished, attempt = attempt, manual = false,
             reason = reason}
  redis.call('ZADD', results, slot, cjson.encode(r))
end
"""

_TRIM = r"""
-- Keep about `size` runs (between N and 2N) and nothing older than `ttl`;
-- never a record of a run still in progress (`running`, `nrun` of them).
-- Claims go before their results, so a finished run never shows as running.
local function over(key, count, nrun, size)
  return redis.call(count, key) - nrun > 2 * size
end

local function trim_history(state, runs, results, now, size, ttl, ttl_due, running, nrun)
  local by_count = over(runs, 'XLEN', nrun, size) or over(results, 'ZCARD', nrun, size)
  local by_ttl = false
  if ttl and now >= ttl_due then
    by_ttl = true
    redis.call('HSET', state, '~ttl', int(now + math.max(10, math.min(math.floor(ttl / 2), 60000))))
  end
  if not (by_count or by_ttl) then return end
  local entries = redis.call('XRANGE', runs, '-', '+')
  local cut = nil
  if by_count then
    if #entries > size then
      local slots = {}
      for i, e in ipairs(entries) do slots[i] = tonumber(e[2][2]) end
      table.sort(slots, function(x, y) return x > y end)
      cut = slots[size]
    end
    if redis.call('ZCARD', results) > size then
      local nth = redis.call('ZREVRANGE', results, size - 1, size - 1, 'WITHSCORES')
      local score = tonumber(nth[2])
      if cut == nil or score < cut then cut = score end
    end
  end
  if ttl then
    local horizon = now - ttl
    if cut == nil or horizon > cut then cut = horizon end
  end
  if cut == nil then return end
  local dead = {}
  for _, e in ipairs(entries) do
    local s = tonumber(e[2][2])
    if s < cut and not running[s] then
      dead[#dead + 1] = e[1]
      if #dead >= 500 then
        redis.call('XDEL', runs, unpack(dead))
        dead = {}
      end
    end
  end
  if #dead > 0 then redis.call('XDEL', runs, unpack(dead)) end
  -- Results below the cut go too, but not those of a slot still running.
  local keep = {}
  for s, _ in pairs(running) do
    if s < cut then keep[#keep + 1] = s end
  end
  table.sort(keep)
  local low = '-inf'
  for _, s in ipairs(keep) do
    redis.call('ZREMRANGEBYSCORE', results, low, '(' .. int(s))
    low = '(' .. int(s)
  end
  redis.call('ZREMRANGEBYSCORE', results, low, '(' .. int(cut))
end

-- Drop old finished run state once late and catch-up claims can no longer ask
-- for it: only beyond the newest `size` runs and older than `keep` ms. The
-- hash's length tells when (five bookkeeping fields sit beside the runs); the
-- slots are read and sorted only then. When every candidate is still needed,
-- `~st` holds the time the first of them may go, and nothing is read before.
local function trim_state(state, now, size, keep, running, nrun)
  if redis.call('HLEN', state) - 5 - nrun <= 2 * size then return end
  local got = redis.call('HMGET', state, '~keep', '~st')
  if got[2] and now < tonumber(got[2]) then return end
  local stored = tonumber(got[1] or '0') or 0
  if stored > keep then keep = stored end
  local slots, names = {}, {}
  for _, f in ipairs(redis.call('HKEYS', state)) do
    local n = tonumber(f)
    if n then
      slots[#slots + 1] = n
      names[n] = f
    end
  end
  table.sort(slots, function(x, y) return x > y end)
  local horizon, dead, wait = now - keep, {}, nil
  for i = size + 1, #slots do
    local s = slots[i]
    if not running[s] then
      if s < horizon then
        dead[#dead + 1] = names[s]
      elseif wait == nil or s + keep < wait then
        wait = s + keep
      end
    end
  end
  for i = 1, #dead, 500 do
    redis.call('HDEL', state, unpack(dead, i, math.min(i + 499, #dead)))
  end
  if wait then
    redis.call('HSET', state, '~st', int(wait + 1))
  elseif got[2] then
    redis.call('HDEL', state, '~st')
  end
end

-- Trimming is amortised: every write to a job counts in `~n` (written with the
-- run's state), and only every `every`-th write (16, or history_size if smaller)
-- checks the bounds and trims; with a history TTL, a write also trims once
-- `~ttl` is due. State and history grow past their bound by at most `every`
-- records between checks.
local function tick(state, runs, results, now, size, keep, ttl, count, ttl_due, act)
  local every = math.max(1, math.min(16, size))
  local due = count % every == 0
  if not due and ttl then due = now >= ttl_due end
  if not due then return end
  local running, nrun = act_set(act)
  trim_state(state, now, size, keep, running, nrun)
  trim_history(state, runs, results, now, size, ttl, ttl_due, running, nrun)
end
"""

_CLAIM = r"""
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
-- claim record (history reads the runs `~act` lists).
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
-- `~act`, the next `~n`, `~ttl`.
local function bookkeeping(got)
  return got[2] or '', (tonumber(got[3] or '0') or 0) + 1, tonumber(got[4] or '0') or 0
end

local function claim(k, slot_s, token, deadline, p)
  local state, runs, results = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local slot, instance, max_attempts = tonumber(slot_s), p.instance, p.max
  local got = redis.call('HMGET', state, slot_s, '~act', '~n', '~ttl')
  local raw = got[1]
  if not raw then
    local act, count, ttl_due = bookkeeping(got)
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
            local o = decode_state(other)
            if o.s == 'running' and o.l > now then blocker, blocker_slot = o, n end
          end
        end
      end
      if blocker then
        if p.wait then return {'overlap', 0, blocker.r, blocker.l, 0} end
        redis.call('HSET', state, slot_s,
                   encode_state({a = 0, t = token, s = 'skipped', r = instance, l = now, b = now,
                                 m = max_attempts, x = 0, f = now}), '~n', count)
        add_result(results, slot, token, instance, 'skipped', now, now, 1, 'overlap')
        trim(act)
        return {'overlap', 0, blocker.r, blocker.l, 0}
      end
    end
    -- encode_state's layout, from strings made once per call.
    local new_act = act_add(act, slot_s)
    redis.call('HSET', state, slot_s,
               '{"a":1,"t":' .. jstr(token) .. ',"s":"running","r":' .. p.jinstance .. ',"l":'
                 .. p.lease_s .. ',"b":' .. now_s .. ',"m":' .. p.max_s .. ',"x":0}',
               '~act', new_act, '~n', count)
    trim(new_act)
    return p.lease_end
  end
  local r = decode_state(raw)
  local mine = 0
  if r.t == token then mine = 1 end
  if mine == 1 and r.s == 'running' and r.x == 0 then
    local lease = math.max(r.l, now + p.lease_ms)
    if lease ~= r.l then
      r.l = lease
      put(state, slot_s, r)
    end
    return {'won', r.a, r.r, r.l, 1}
  end
  if r.s ~= 'running' or mine == 1 then return {'done', r.a, r.r, r.l, mine} end
  if r.l > now then return {'running', r.a, r.r, r.l, 0} end
  local act, count, ttl_due = bookkeeping(got)
  if r.a < max_attempts then
    if r.x == 0 then
      add_result(results, slot, r.t, r.r, 'interrupted', r.b, math.max(r.l, r.b), r.a, 'lease_lost')
    end
    r.a = r.a + 1
    r.t, r.r, r.l, r.m, r.b, r.x, r.e = token, instance, now + p.lease_ms, max_attempts, now, 0, nil
    local new_act = act_add(act, slot_s)
    redis.call('HSET', state, slot_s, encode_state(r), '~act', new_act, '~n', count)
    tick(state, runs, results, now, p.size, p.keep, p.ttl, count, ttl_due, new_act)
    return {'won', r.a, instance, r.l, 1}
  end
  if r.x == 0 then
    add_result(results, slot, r.t, r.r, 'interrupted', r.b, math.max(now, r.b), r.a,
               'attempts_exhausted')
  end
  r.s, r.f = 'interrupted', now
  redis.call('HSET', state, slot_s, encode_state(r), '~act', act_del(act, slot_s))
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
"""

_HEARTBEAT = r"""
-- KEYS: per run: state   ARGV: lease_ms, then per run: slot, token
-- Returns per run 1 if the lease was extended.
local lease = now_ms() + tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local state, slot_s, token = KEYS[i], ARGV[2 * i], ARGV[2 * i + 1]
  out[i] = 0
  local raw = redis.call('HGET', state, slot_s)
  if raw then
    local r = decode_state(raw)
    if r.t == token and r.s == 'running' and r.x == 0 then
      r.l = lease
      put(state, slot_s, r)
      out[i] = 1
    end
  end
end
return out
"""

_FINISH_FN = r"""
-- finish(): 1 if the run is now finished by this token (also for a retried finish).
-- One HMGET and one HSET (the state and `~act`). A running state in
-- encode_state's layout is rewritten with plain string search, others decoded.
local now = now_ms()
local now_s = int(now)
local jstatus = {}

local function finish(state, slot_s, token, status)
  local got = redis.call('HMGET', state, slot_s, '~act')
  local raw = got[1]
  if not raw then return 0 end
  local new = nil
  if plain(token) and string.sub(raw, -7) == ',"x":0}' then
    local needle = ',"t":"' .. token .. '","s":"running",'
    local i, j = string.find(raw, needle, 1, true)
    if i then
      local js = jstatus[status]
      if not js then
        js = jstr(status)
        jstatus[status] = js
      end
      new = string.sub(raw, 1, i - 1) .. ',"t":"' .. token .. '","s":"finished",'
        .. string.sub(raw, j + 1, -2) .. ',"f":' .. now_s .. ',"o":' .. js .. '}'
    end
  end
  if not new then
    local r = decode_state(raw)
    if r.t ~= token then return 0 end
    if r.s == 'finished' then return 1 end
    if r.s ~= 'running' or r.x ~= 0 then return 0 end
    r.s, r.f, r.o = 'finished', now, status
    new = encode_state(r)
  end
  local act = got[2] or ''
  if act == slot_s then act = '' else act = act_del(act, slot_s) end
  redis.call('HSET', state, slot_s, new, '~act', act)
  return 1
end
"""

_FINISH = r"""
-- KEYS: per run: state   ARGV: per run: slot, token, status
-- Returns per run 1 if it is now finished by this token (also for a retried finish).
local out = {}
for i = 1, #KEYS do
  local a = (i - 1) * 3
  out[i] = finish(KEYS[i], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
end
return out
"""

_RELEASE_FN = r"""
-- release(): ends the token's lease now (a backup takes over at its next
-- re-check); on the last attempt the run is interrupted instead. 1 also for
-- a retried release.
local function release(state, results, slot_s, token)
  local got = redis.call('HMGET', state, slot_s, '~act')
  local raw = got[1]
  if not raw then return 0 end
  local r = decode_state(raw)
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
    redis.call('HSET', state, slot_s, encode_state(r), '~act', act_del(got[2], slot_s))
  else
    r.l, r.x = now, 1
    put(state, slot_s, r)
  end
  return 1
end
"""

_RELEASE = r"""
-- KEYS: state, results   ARGV: slot, token   Returns 1 if released (also for a retry).
return release(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
"""

_RELEASE_MANY = r"""
-- KEYS: per run: state, results   ARGV: per run: slot, token
-- Returns per run 1 if released (also for a retried release).
local out = {}
for i = 1, #KEYS / 2 do
  out[i] = release(KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
end
return out
"""

_FINISH_SAVE = r"""
-- A finish and its result in one step per run: the result is stored only if
-- this token finished the run (a retry stores the same member again).
-- KEYS: per run: state, results   ARGV: per run: slot, token, status, result (JSON)
-- Returns per run 1 if it is now finished by this token.
local out = {}
for i = 1, #KEYS / 2 do
  local k, a = (i - 1) * 2, (i - 1) * 4
  local slot_s = ARGV[a + 1]
  local done = finish(KEYS[k + 1], slot_s, ARGV[a + 2], ARGV[a + 3])
  if done == 1 then redis.call('ZADD', KEYS[k + 2], slot_s, ARGV[a + 4]) end
  out[i] = done
end
return out
"""

_SAVE = r"""
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
  local manual = kind == '1'
  if kind == '0' and status ~= 'running' then
    local raw = redis.call('HGET', state, slot_s)
    -- Only a run still running is decoded (a lease run was finished already).
    if raw and string.find(raw, '"s":"running"', 1, true) then
      local r = decode_state(raw)
      if r.t == token and r.s == 'running' then
        r.s, r.f, r.o = 'finished', now, status
        local act = redis.call('HGET', state, '~act')
        redis.call('HSET', state, slot_s, encode_state(r), '~act', act_del(act, slot_s))
      end
    end
  end
  redis.call('ZADD', results, slot_s, ARGV[a + 3])
  -- A scheduled run's claim counted already (it ticks, and trims results too);
  -- a manual run has no claim here, so its result counts.
  if manual then
    local p = 1 + (tonumber(ARGV[a + 6]) - 1) * 3
    local got = redis.call('HMGET', state, '~n', '~ttl', '~act')
    local count = (tonumber(got[1] or '0') or 0) + 1
    redis.call('HSET', state, '~n', count)
    tick(state, runs, results, now, tonumber(ARGV[p + 1]), tonumber(ARGV[p + 3]),
         opt(ARGV[p + 2]), count, tonumber(got[2] or '0') or 0, got[3] or '')
  end
  return 1
end

local out = {}
for i = 1, #KEYS / 3 do
  out[i] = save((i - 1) * 3, base + (i - 1) * 6)
end
return out
"""

_ACTIVE = r"""
-- KEYS: state, legacy active set   Returns {now, slot, attempt, runner, lease, token, ...}
-- (unfinished runs: those `~act` lists, and any in the set a previous release kept).
local out = {now_ms()}
local seen = {}
local slots = {}
for s in string.gmatch(redis.call('HGET', KEYS[1], '~act') or '', '[^,]+') do
  if not seen[s] then seen[s] = true; slots[#slots + 1] = s end
end
for _, s in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not seen[s] then seen[s] = true; slots[#slots + 1] = s end
end
for _, s in ipairs(slots) do
  local raw = redis.call('HGET', KEYS[1], s)
  if raw then
    local r = decode_state(raw)
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
"""

_PREPARE = r"""
-- KEYS: state, legacy active set, legacy slots index   ARGV: keep_ms ('' = unknown)
-- Remember the longest time any instance needs run state kept. A store written
-- by a release before `~act` is upgraded: the runs its `active` set lists that
-- are still running join `~act`, and the set and the `slots` index are dropped.
local state = KEYS[1]
if ARGV[1] ~= '' then
  local stored = tonumber(redis.call('HGET', state, '~keep') or '0')
  if tonumber(ARGV[1]) > stored then redis.call('HSET', state, '~keep', ARGV[1]) end
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  local act = redis.call('HGET', state, '~act') or ''
  for _, s in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local raw = redis.call('HGET', state, s)
    if raw and decode_state(raw).s == 'running' then act = act_add(act, s) end
  end
  redis.call('HSET', state, '~act', act)
  redis.call('DEL', KEYS[2])
end
redis.call('DEL', KEYS[3])
return 1
"""

_TRIM_STREAM = r"""
-- KEYS: one stream   ARGV: history_size, history_ttl_ms ('' = none), keep_newest (0/1),
--                          slot field ('' = the entry ID is the slot)
-- Trims to `size` entries once over 2 * size, and drops entries older than the TTL
-- (by entry ID time), keeping the newest one when asked. Returns {removed, oldest slot or ''}.
local key, size, ttl = KEYS[1], tonumber(ARGV[1]), opt(ARGV[2])
local removed = 0
if redis.call('XLEN', key) > 2 * size then
  removed = removed + redis.call('XTRIM', key, 'MAXLEN', size)
end
if ttl then
  local horizon = now_ms() - ttl
  if horizon > 0 then
    local old = redis.call('XRANGE', key, '-', int(horizon - 1), 'COUNT', 1000)
    local ids = {}
    for i, e in ipairs(old) do ids[i] = e[1] end
    if ARGV[3] == '1' and #ids > 0 and #ids >= redis.call('XLEN', key) then
      table.remove(ids)
    end
    for i = 1, #ids, 500 do
      local last = math.min(i + 499, #ids)
      removed = removed + redis.call('XDEL', key, unpack(ids, i, last))
    end
  end
end
local first = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)
if #first == 0 then return {removed, ''} end
if ARGV[4] == '' then
  local ms = string.match(first[1][1], '^(%d+)')
  return {removed, ms}
end
local fields = first[1][2]
for i = 1, #fields, 2 do
  if fields[i] == ARGV[4] then return {removed, fields[i + 1]} end
end
return {removed, ''}
"""


PRELUDE = _PRELUDE
"""The helpers every script starts with (``now_ms``, ``int``, ``opt``): for scripts in other modules."""
STATE_LIB = _STATE
"""Run state helpers (``encode_state``, ``decode_state``, ``put``, the ``~act`` list): for other modules."""
LEASE_LIB = _LEASE_LIB
"""The lease helpers (``add_result``): for scripts in other modules."""


def _script(name: str, *parts: str) -> LuaScript:
    return LuaScript(name, "".join(parts))


LEASE_CLAIM = _script("claim", _PRELUDE, _STATE, _LEASE_LIB, _TRIM, _CLAIM)
LEASE_HEARTBEAT = _script("heartbeat", _PRELUDE, _STATE, _HEARTBEAT)
LEASE_FINISH = _script("finish", _PRELUDE, _STATE, _FINISH_FN, _FINISH)
LEASE_FINISH_SAVE = _script("finish-save", _PRELUDE, _STATE, _FINISH_FN, _FINISH_SAVE)
LEASE_RELEASE = _script("release", _PRELUDE, _STATE, _LEASE_LIB, _RELEASE_FN, _RELEASE)
LEASE_RELEASE_MANY = _script(
    "release-many", _PRELUDE, _STATE, _LEASE_LIB, _RELEASE_FN, _RELEASE_MANY
)
LEASE_SAVE = _script("save", _PRELUDE, _STATE, _LEASE_LIB, _TRIM, _SAVE)
LEASE_ACTIVE = _script("active", _PRELUDE, _STATE, _ACTIVE)
LEASE_PREPARE = _script("prepare", _PRELUDE, _STATE, _PREPARE)
TRIM_STREAM = _script("trim-stream", _PRELUDE, _TRIM_STREAM)

LEASE_SCRIPTS = (
    LEASE_CLAIM,
    LEASE_HEARTBEAT,
    LEASE_FINISH,
    LEASE_FINISH_SAVE,
    LEASE_RELEASE,
    LEASE_RELEASE_MANY,
    LEASE_SAVE,
    LEASE_ACTIVE,
    LEASE_PREPARE,
)
"""Every script of the ``lease`` strategy (loaded at ``init()``)."""

STREAM_ID_SCRIPTS = (TRIM_STREAM,)
"""Every script of the ``stream-id`` strategy (loaded at ``init()``)."""

_FIELD = r"""
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end
"""

_SCRIPT_CLAIM = r"""
-- KEYS: runs   ARGV: slot, token, instance, window_ms
-- Scans the claims of the last window_ms (and from window_ms before the slot) for
-- the slot; appends a claim only if none is there. Returns 1 if the slot is this
-- token's, 0 if another token has it or the slot is older than the window (late).
local key, slot_s, token = KEYS[1], ARGV[1], ARGV[2]
local slot, window = tonumber(slot_s), tonumber(ARGV[4])
local now = now_ms()
if slot < now - window then return 0 end
local from = math.min(now, slot) - window
if from < 0 then from = 0 end
for _, e in ipairs(redis.call('XREVRANGE', key, '+', int(from))) do
  if field(e[2], 'slot') == slot_s then
    if field(e[2], 'token') == token then return 1 end
    return 0
  end
end
redis.call('XADD', key, '*', 'slot', slot_s, 'token', token, 'instance', ARGV[3], 'at', int(now))
return 1
"""

_IDMP_CREATE = r"""
local function create(key, duration, maxsize)
  -- XCFGSET only when the stream is created: changing the values later would
  -- clear the slots the server remembers. MAXLEN 0 leaves an empty stream.
  if redis.call('EXISTS', key) == 1 then return 0 end
  redis.call('XADD', key, 'MAXLEN', '0', '*', 'slot', '-1')
  redis.call('XCFGSET', key, 'IDMP-DURATION', duration, 'IDMP-MAXSIZE', maxsize)
  return 1
end
"""

_IDMP_PREPARE = r"""
-- KEYS: runs   ARGV: duration_sec, max_size   Returns 1 if the stream was created.
return create(KEYS[1], ARGV[1], ARGV[2])
"""

_IDMP_CLAIM = r"""
-- KEYS: runs   ARGV: job (producer id), slot (idempotent id), token, instance,
--              duration_sec, max_size
-- XADD IDMP answers a duplicate with the first entry's ID; that entry's token
-- tells whether the slot is ours. Returns 1 if it is, else 0.
local key, slot_s, token = KEYS[1], ARGV[2], ARGV[3]
create(key, ARGV[5], ARGV[6])
local id = redis.call('XADD', key, 'IDMP', ARGV[1], slot_s, '*', 'slot', slot_s,
                      'token', token, 'instance', ARGV[4], 'at', int(now_ms()))
local found = redis.call('XRANGE', key, id, id)
if #found == 0 then return 0 end
if field(found[1][2], 'token') == token then return 1 end
return 0
"""

_TRIM_DEDUPE = r"""
-- KEYS: runs   ARGV: history_size, history_ttl_ms ('' = none), keep_ms
-- History keeps about `size` runs (N..2N) and none older than the TTL: returns the
-- slot below which history is hidden ('' = no change). Entries are deleted only
-- once de-duplication no longer needs them: older than keep_ms by entry time and
-- by slot, and below the cut.
local key, size, ttl, keep = KEYS[1], tonumber(ARGV[1]), opt(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local cut = nil
if redis.call('XLEN', key) > 2 * size then
  local slots = {}
  for _, e in ipairs(redis.call('XREVRANGE', key, '+', '-', 'COUNT', 2 * size)) do
    local s = tonumber(field(e[2], 'slot'))
    if s then slots[#slots + 1] = s end
  end
  table.sort(slots, function(x, y) return x > y end)
  cut = slots[size]
end
if ttl then
  local horizon = now - ttl
  if cut == nil or horizon > cut then cut = horizon end
end
if cut == nil then return '' end
local limit = math.min(cut, now - keep)
if limit > 0 then
  local dead = {}
  for _, e in ipairs(redis.call('XRANGE', key, '-', int(now - keep - 1), 'COUNT', 1000)) do
    local s = tonumber(field(e[2], 'slot'))
    if s == nil or s < limit then dead[#dead + 1] = e[1] end
  end
  for i = 1, #dead, 500 do
    redis.call('XDEL', key, unpack(dead, i, math.min(i + 499, #dead)))
  end
end
return int(cut)
"""

_SET_MAX = r"""
-- KEYS: one string key   ARGV: number   Raises the stored number to ARGV[1]; returns it.
local cur = tonumber(redis.call('GET', KEYS[1]) or '')
local new = tonumber(ARGV[1])
if cur == nil or new > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return redis.call('GET', KEYS[1])
"""

SCRIPT_CLAIM = _script("script-claim", _PRELUDE, _FIELD, _SCRIPT_CLAIM)
IDMP_PREPARE = _script("idmp-prepare", _PRELUDE, _IDMP_CREATE, _IDMP_PREPARE)
IDMP_CLAIM = _script("idmp-claim", _PRELUDE, _FIELD, _IDMP_CREATE, _IDMP_CLAIM)
TRIM_DEDUPE = _script("trim-dedupe", _PRELUDE, _FIELD, _TRIM_DEDUPE)
SET_MAX = _script("set-max", _SET_MAX)

SCRIPT_SCRIPTS = (SCRIPT_CLAIM, TRIM_DEDUPE, TRIM_STREAM, SET_MAX)
"""Every script of the ``script`` strategy (loaded at ``init()``)."""

IDMP_SCRIPTS = (IDMP_PREPARE, IDMP_CLAIM, TRIM_DEDUPE, TRIM_STREAM, SET_MAX)
"""Every script of the ``idmp`` strategy (loaded at ``init()``)."""
