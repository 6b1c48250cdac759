-- The leader lease (fleet/dispatch/lease.py): take KEYS[1] if free, with a new token.
-- ARGV: ttl ms, holder. Returns the token, or false when another holds the lease.
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = redis.call('INCR', KEYS[1] .. ':seq')
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
redis.call('SET', KEYS[1] .. ':holder', ARGV[2], 'PX', ARGV[1])
return token
