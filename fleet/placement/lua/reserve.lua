-- ARGV: now, id, json, expires_at, then (field, take, basis) triples.
-- Returns 0 when refused, else the member's version after it (held already: the version as is).
expire(ARGV[1])
local id = ARGV[2]
if redis.call('HEXISTS', K_ITEMS, id) == 1 then return version() end
for i = 5, #ARGV, 3 do
  local have = tonumber(redis.call('HGET', K_HELD, ARGV[i]) or '0')
  if have + tonumber(ARGV[i + 1]) > tonumber(ARGV[i + 2]) then return 0 end
end
for i = 5, #ARGV, 3 do
  redis.call('HINCRBY', K_HELD, ARGV[i], ARGV[i + 1])
  redis.call('HSET', k_takes(id), ARGV[i], ARGV[i + 1])
end
redis.call('HSET', K_ITEMS, id, ARGV[3])
redis.call('ZADD', K_EXPIRY, ARGV[4], id)
return redis.call('INCR', K_VERSION)
