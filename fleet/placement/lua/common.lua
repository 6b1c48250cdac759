-- Shared by the reservation scripts (fleet/placement/redis_store.py), after the key names of
-- ReservationKeys.lua() (BASE is KEYS[1], the member's base name).

local function drop(id)
  local takes = redis.call('HGETALL', k_takes(id))
  for i = 1, #takes, 2 do
    local left = redis.call('HINCRBY', K_HELD, takes[i], -tonumber(takes[i + 1]))
    if left == 0 then redis.call('HDEL', K_HELD, takes[i]) end
  end
  redis.call('DEL', k_takes(id))
  redis.call('HDEL', K_ITEMS, id)
  redis.call('ZREM', K_EXPIRY, id)
  redis.call('INCR', K_VERSION)
end

local function version()
  return tonumber(redis.call('GET', K_VERSION) or '0')
end

local function expire(now)
  local due = redis.call('ZRANGEBYSCORE', K_EXPIRY, '-inf', now)
  for _, id in ipairs(due) do drop(id) end
end
