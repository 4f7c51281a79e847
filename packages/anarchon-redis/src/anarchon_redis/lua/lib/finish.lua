-- finish(): 1 if the run is now finished by this token (also for a retried finish,
-- which writes the state again, so a WAIT after it has a write of its own to wait
-- for), 2 if the run had no state at all (a fail-over lost its claim): a
-- finished state is written for the token, 0 if another token owns the run.
-- One HMGET and one HSET (the state and `~act`). A running state in
-- encode_state's layout is rewritten with plain string search, others decoded.
local now = now_ms()
local now_s = int(now)
local jstatus = {}

local function finish(state, slot_s, token, status)
  local got = redis.call('HMGET', state, slot_s, '~act')
  local raw = got[1]
  if not raw then
    redis.call('HSET', state, slot_s,
               encode_state({a = 1, t = token, s = 'finished', r = '', l = now, b = now, m = 1,
                             x = 0, f = now, o = status}))
    return 2
  end
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
    local r = decode_state(raw, state, slot_s)
    if r.t ~= token then return 0 end
    if r.s == 'finished' then
      redis.call('HSET', state, slot_s, raw)
      return 1
    end
    if r.s ~= 'running' or r.x ~= 0 then return 0 end
    r.s, r.f, r.o = 'finished', now, status
    new = encode_state(r)
  end
  local act = got[2] or ''
  if act == slot_s then act = '' else act = act_del(act, slot_s, state) end
  redis.call('HSET', state, slot_s, new, '~act', act)
  return 1
end
