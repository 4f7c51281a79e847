-- KEYS: one string key   ARGV: number   Raises the stored number to ARGV[1]; returns it.
-- A stored value that is not a whole number is not ours: left as it is and
-- returned, for the caller to report.
local raw = redis.call('GET', KEYS[1])
if raw and not string.find(raw, '^%-?%d+$') then return raw end
local cur = tonumber(raw or '')
local new = tonumber(ARGV[1])
if cur == nil or new > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return raw
