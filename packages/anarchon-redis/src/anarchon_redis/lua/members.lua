-- KEYS: <prefix>members (hash: field <instance_id> -> {"r": roster, "seen": ms, "exp": ms})
-- ARGV: instance_id, roster, ttl_ms; an empty instance_id is a read that writes nothing.
-- A refresh writes its field at server time, deletes the fields that expired (a field it
-- cannot read is left for the client to report) and reads the hash. Returns {now, HGETALL}.
local key = KEYS[1]
local now = now_ms()
if ARGV[1] == '' then
  return {int(now), redis.call('HGETALL', key)}
end
local value = '{"r":' .. cjson.encode(ARGV[2]) .. ',"seen":' .. int(now)
  .. ',"exp":' .. int(now + tonumber(ARGV[3])) .. '}'
redis.call('HSET', key, ARGV[1], value)
local all = redis.call('HGETALL', key)
local gone = {}
for i = 1, #all, 2 do
  local ok, record = pcall(cjson.decode, all[i + 1])
  if ok and type(record) == 'table' and type(record.exp) == 'number' and record.exp <= now then
    gone[#gone + 1] = all[i]
  end
end
if #gone == 0 then
  return {int(now), all}
end
for i = 1, #gone, 500 do
  redis.call('HDEL', key, unpack(gone, i, math.min(i + 499, #gone)))
end
return {int(now), redis.call('HGETALL', key)}
