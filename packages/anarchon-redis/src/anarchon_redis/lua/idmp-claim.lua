-- KEYS: runs   ARGV: job (producer id), slot (idempotent id), token, instance,
--              duration_sec, max_size
-- XADD IDMP answers a duplicate with the first entry's ID; that entry's token
-- tells whether the slot is ours. Returns 1 if it is, else 0.
local key, slot_s, token = KEYS[1], ARGV[2], ARGV[3]
create(key, ARGV[5], ARGV[6])
local id = redis.call('XADD', key, 'IDMP', ARGV[1], slot_s, '*', 'slot', slot_s,
                      'token', token, 'instance', ARGV[4], 'at', int(now_ms()))
local found = redis.call('XRANGE', key, id, id)
if #found == 0 then return 0 end
if field(found[1][2], 'token') == token then return 1 end
return 0
