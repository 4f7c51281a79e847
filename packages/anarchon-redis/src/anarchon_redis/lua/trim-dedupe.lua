-- KEYS: runs   ARGV: history_size, history_ttl_ms ('' = none), keep_ms
-- History keeps about `size` runs (N..2N) and none older than the TTL: returns the
-- slot below which history is hidden ('' = no change). Entries are deleted only
-- once de-duplication no longer needs them: older than keep_ms by entry time and
-- by slot, and below the cut. An entry without a whole-number slot is not ours:
-- it is left as it is (history skips and reports it).
local key, size, ttl, keep = KEYS[1], tonumber(ARGV[1]), opt(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local cut = nil
if redis.call('XLEN', key) > 2 * size then
  local slots = {}
  for _, e in ipairs(redis.call('XREVRANGE', key, '+', '-', 'COUNT', 2 * size)) do
    local s = whole(field(e[2], 'slot'))
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
    local s = whole(field(e[2], 'slot'))
    if s and s < limit then dead[#dead + 1] = e[1] end  -- an entry not ours stays
  end
  for i = 1, #dead, 500 do
    redis.call('XDEL', key, unpack(dead, i, math.min(i + 499, #dead)))
  end
end
return int(cut)
