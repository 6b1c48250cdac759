-- The leader lease: extend KEYS[1] while it holds this holder's token.
-- ARGV: ttl ms, token. Returns 1, or 0 when the lease was lost.
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[1])
return 1
