if redis.replicate_commands then pcall(redis.replicate_commands) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(n) return string.format('%d', n) end
local function opt(s) if s == nil or s == '' then return nil end return tonumber(s) end
-- A whole number as the scripts and the client write it (decimal digits, below
-- 2^53), else nil: Lua's tonumber also takes '1e400', 'nan', 'inf' and '0x10'.
local function whole(s)
  if type(s) ~= 'string' or #s > 16 or not string.find(s, '^%-?%d+$') then return nil end
  return tonumber(s)
end
