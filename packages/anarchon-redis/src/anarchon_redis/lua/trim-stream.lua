-- KEYS: one stream   ARGV: history_size, history_ttl_ms ('' = none), keep_newest (0/1),
--                          slot field ('' = the entry ID is the slot)
-- Trims to `size` entries once over 2 * size, and drops entries older than the TTL
-- (by entry ID time), keeping the newest one when asked. Returns {removed, oldest slot or ''}
-- ('' for an empty stream).
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
return {removed, 'no slot'}  -- an entry that is not ours (the caller reports it)
