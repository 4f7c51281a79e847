-- KEYS: one string key   ARGV: number   Raises the stored number to ARGV[1]; returns it.
local cur = tonumber(redis.call('GET', KEYS[1]) or '')
local new = tonumber(ARGV[1])
if cur == nil or new > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return redis.call('GET', KEYS[1])
