-- ARGV: id. Returns 0 when it is not held, else the member's version after the release.
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then return 0 end
drop(ARGV[1])
return version()
