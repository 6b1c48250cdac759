-- ARGV: id.
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then return 0 end
drop(ARGV[1])
return 1
