-- ARGV: now. Returns the version after dropping expired reservations.
expire(ARGV[1])
return version()
