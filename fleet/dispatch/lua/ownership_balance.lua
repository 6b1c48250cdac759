-- A syncer's round of member leases (fleet/dispatch/ownership.py). KEYS[1] the owners hash;
-- ARGV: me, ttl ms, then member, want (1: it should be mine; 0: another live syncer's) pairs.
-- Returns the members held by ``me`` after the round.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, ttl = ARGV[1], tonumber(ARGV[2])
local mine = {}
for i = 3, #ARGV, 2 do
  local member, want = ARGV[i], ARGV[i + 1] == '1'
  local current = redis.call('HGET', KEYS[1], member)
  local holder, expiry = nil, 0
  if current then
    local bar = string.find(current, '|', 1, true)
    holder, expiry = string.sub(current, 1, bar - 1), tonumber(string.sub(current, bar + 1))
  end
  local free = (not current) or expiry <= now
  if holder == me and not free then
    if want then
      redis.call('HSET', KEYS[1], member, me .. '|' .. (now + ttl))
      mine[#mine + 1] = member
    else
      redis.call('HDEL', KEYS[1], member)
    end
  elseif free and want then
    redis.call('HSET', KEYS[1], member, me .. '|' .. (now + ttl))
    mine[#mine + 1] = member
  end
end
return mine
