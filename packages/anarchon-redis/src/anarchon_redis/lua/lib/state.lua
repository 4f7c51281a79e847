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
    if type(r[name]) ~= kind then foreign(key, field, 'has no ' .. kind .. ' "' .. name .. '"') end
  end
  return r
end
-- A number stored in a bookkeeping field, or nil when the field is absent.
local function stored_number(value, key, field)
  if value == nil or value == false then return nil end
  local n = tonumber(value)
  if not n then foreign(key, field, 'is not a number') end
  return n
end
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
      local n = tonumber(s)
      if n then running[n] = true end
      n = n + 1
    end
  end
  return running, n
end
