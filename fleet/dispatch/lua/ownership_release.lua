-- A syncer going away (fleet/dispatch/ownership.py). KEYS[1] the owners hash, KEYS[2] the live
-- syncers; ARGV: me, then the members it held. Returns how many it released.
local released = 0
for i = 2, #ARGV do
  local current = redis.call('HGET', KEYS[1], ARGV[i])
  if current and string.sub(current, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
    redis.call('HDEL', KEYS[1], ARGV[i])
    released = released + 1
  end
end
redis.call('ZREM', KEYS[2], ARGV[1])
return released
