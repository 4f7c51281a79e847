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
-- Data anarchon did not write (not JSON, a field missing or of another type)
-- ends the script with an error reply the client turns into ForeignDataError:
-- `ANARCHON_FOREIGN_DATA <key>[<field>] <what>` (the key as the client sent it).
local function foreign(key, field, what)
  error({err = 'ANARCHON_FOREIGN_DATA ' .. key .. '[' .. field .. '] ' .. what})
end
local STATE_TYPES = {a = 'number', t = 'string', s = 'string', r = 'string', l = 'number',
                     b = 'number', m = 'number', x = 'number'}
local function decode_state(raw, key, field)
  local ok, r = pcall(cjson.decode, raw)
  if not ok or type(r) ~= 'table' then foreign(key, field, 'is not JSON run state') end
  for name, kind in pairs(STATE_TYPES) do
    local v = r[name]
    if type(v) ~= kind then foreign(key, field, 'has no ' .. kind .. ' "' .. name .. '"') end
    -- 1e400 decodes to inf, which string.format('%d') would write back as garbage
    if kind == 'number' and not (v % 1 == 0 and v > -2^53 and v < 2^53) then
      foreign(key, field, 'has "' .. name .. '" that is not a whole number')
    end
  end
  return r
end
-- A whole number stored in a bookkeeping field, or nil when the field is absent.
local function stored_number(value, key, field)
  if value == nil or value == false then return nil end
  local n = whole(value)
  if not n then foreign(key, field, 'is not a whole number') end
  return n
end
-- A token or status that can stand in JSON as it is (no quote or backslash):
-- then a stored state can be matched and rewritten with plain string search.
local function plain(s) return not string.find(s, '[\\"]') end
local function put(state, slot, r) redis.call('HSET', state, slot, encode_state(r)) end

-- `~act` lists the slots of runs not ended yet, comma-separated: it is written
-- in the same HSET as the run's state, so it costs no command of its own.
-- Each function that reads it checks it holds only slots (`key` names the hash).
local function act_check(act, key)
  if act and act ~= '' then
    for s in string.gmatch(act .. ',', '([^,]*),') do
      if not whole(s) then foreign(key, '~act', 'is not a list of slots') end
    end
  end
  return act or ''
end
local function act_has(act, slot_s)
  if not act or act == '' then return false end
  return string.find(',' .. act .. ',', ',' .. slot_s .. ',', 1, true) ~= nil
end
local function act_add(act, slot_s, key)
  act = act_check(act, key)
  if act == '' then return slot_s end
  if act_has(act, slot_s) then return act end
  return act .. ',' .. slot_s
end
local function act_del(act, slot_s, key)
  act = act_check(act, key)
  if act == '' then return '' end
  local out = {}
  for s in string.gmatch(act, '[^,]+') do
    if s ~= slot_s then out[#out + 1] = s end
  end
  return table.concat(out, ',')
end
local function act_set(act, key)
  local running, count = {}, 0
  for s in string.gmatch(act_check(act, key), '[^,]+') do
    running[tonumber(s)] = true
    count = count + 1
  end
  return running, count
end
