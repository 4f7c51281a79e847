-- The slot of a `runs` entry (its first field), or nil for an entry that is not
-- a claim: that one is left as it is (history skips and reports it).
local function entry_slot(e)
  if e[2][1] ~= 'slot' then return nil end
  return whole(e[2][2])
end

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
      for _, e in ipairs(entries) do
        local s = entry_slot(e)
        if s then slots[#slots + 1] = s end
      end
      table.sort(slots, function(x, y) return x > y end)
      cut = slots[size]
    end
    if redis.call('ZCARD', results) > size then
      local nth = redis.call('ZREVRANGE', results, size - 1, size - 1, 'WITHSCORES')
      local score = whole(nth[2])  -- nil for a member scored inf or 1.5: not ours
      if score and (cut == nil or score < cut) then cut = score end
    end
  end
  if ttl then
    local horizon = now - ttl
    if cut == nil or horizon > cut then cut = horizon end
  end
  if cut == nil then return end
  local dead = {}
  for _, e in ipairs(entries) do
    local s = entry_slot(e)
    if s and s < cut and not running[s] then
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
  local st = stored_number(got[2], state, '~st')
  if st and now < st then return end
  local stored = stored_number(got[1], state, '~keep') or 0
  if stored > keep then keep = stored end
  local slots, names = {}, {}
  for _, f in ipairs(redis.call('HKEYS', state)) do
    local n = whole(f)
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
  local running, nrun = act_set(act, state)
  trim_state(state, now, size, keep, running, nrun)
  trim_history(state, runs, results, now, size, ttl, ttl_due, running, nrun)
end
