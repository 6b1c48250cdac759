-- ARGV: now. Returns the version after dropping expired reservations.
expire(ARGV[1])
return tonumber(redis.call('GET', K_VERSION) or '0')
