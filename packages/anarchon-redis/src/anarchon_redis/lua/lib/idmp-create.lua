local function create(key, duration, maxsize)
  -- XCFGSET only when the stream is created: changing the values later would
  -- clear the slots the server remembers. MAXLEN 0 leaves an empty stream.
  if redis.call('EXISTS', key) == 1 then return 0 end
  redis.call('XADD', key, 'MAXLEN', '0', '*', 'slot', '-1')
  redis.call('XCFGSET', key, 'IDMP-DURATION', duration, 'IDMP-MAXSIZE', maxsize)
  return 1
end
