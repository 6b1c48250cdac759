-- Mark a member degraded (fleet/dispatch/degraded.py). KEYS[1] the hash; ARGV: member, now,
-- hold, reason, failures. Keeps ``since`` of a mark that is there (a member stays degraded until
-- a call succeeds), renews ``until``.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local since = tonumber(ARGV[2])
if old then
  local ok, decoded = pcall(cjson.decode, old)
  if ok and type(decoded) == 'table' and tonumber(decoded['since']) then
    since = tonumber(decoded['since'])
  end
end
local record = cjson.encode({since = since, ['until'] = tonumber(ARGV[2]) + tonumber(ARGV[3]),
  reason = ARGV[4], failures = tonumber(ARGV[5])})
redis.call('HSET', KEYS[1], ARGV[1], record)
return tostring(since)
