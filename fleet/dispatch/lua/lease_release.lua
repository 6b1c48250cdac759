-- The leader lease: free KEYS[1] if it holds this holder's token. ARGV: token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[1] .. ':holder')
return 1
