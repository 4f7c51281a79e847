local function add_result(results, slot, token, runner, status, started, finished, attempt, reason)
  local r = {slot = slot, token = token, instance_id = runner, status = status,
             started_at = started, finished_at = finished, attempt = attempt, manual = false,
             reason = reason}
  redis.call('ZADD', results, slot, cjson.encode(r))
end
