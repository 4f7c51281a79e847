-- KEYS: runs   ARGV: slot, token, instance, window_ms
-- Scans the claims of the last window_ms (and from window_ms before the slot) for
-- the slot; appends a claim only if none is there. Returns 1 if the slot is this
-- token's, 0 if another token has it or the slot is older than the window (late).
local key, slot_s, token = KEYS[1], ARGV[1], ARGV[2]
local slot, window = tonumber(slot_s), tonumber(ARGV[4])
local now = now_ms()
if slot < now - window then return 0 end
local from = math.min(now, slot) - window
if from < 0 then from = 0 end
for _, e in ipairs(redis.call('XREVRANGE', key, '+', int(from))) do
  if field(e[2], 'slot') == slot_s then
    if field(e[2], 'token') == token then return 1 end
    return 0
  end
end
redis.call('XADD', key, '*', 'slot', slot_s, 'token', token, 'instance', ARGV[3], 'at', int(now))
return 1
