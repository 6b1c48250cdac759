-- Recompute every node's derived fields (usage, pending count, due) and the
-- queues from the job records, and compare them with what is stored: ARGV = fix ('1'
-- writes the recomputed values). Returns the drift as {node, field, stored, expected}
-- rows ('queue' compares a node's queue with its pending records by length), or
-- {-1, why} when a record names a node the tree does not hold.
local fix = ARGV[1] == '1'
local names = redis.call('SMEMBERS', K_NODES)
if #names == 0 then names = {IMPLICIT_ROOT} end
local chains = {}
local derived, queued = derive(names, function(leaf)
  if chains[leaf] == nil then chains[leaf] = chain_of(leaf) or false end
  return chains[leaf] or nil
end, function(name)
  local v = redis.call('HMGET', k_node(name), 'parent', 'mins')
  local mins = {}
  for _, r in ipairs(split(v[2] or '')) do
    mins[r] = tonumber(redis.call('HGET', k_node(name), 'min:' .. r))
  end
  return v[1] or '', mins
end)
if not derived then
  return {-1, 'job ' .. queued[3] .. ' is ' .. queued[1] .. ' on ' .. queued[2] ..
              ', which the tree does not hold'}
end
local DERIVED = {used = true, due = true}
local drift = {}
for _, n in ipairs(names) do
  local want = derived[n]
  local have = {}
  local all = redis.call('HGETALL', k_node(n))
  for i = 1, #all, 2 do
    local field = all[i]
    local prefix = string.match(field, '^(%a+):')
    if (field == 'pending' or DERIVED[prefix]) and all[i + 1] ~= '0' then have[field] = all[i + 1] end
  end
  for field, value in pairs(want) do
    if have[field] ~= value then
      drift[#drift + 1] = {n, field, have[field] or '0', value}
      if fix then redis.call('HSET', k_node(n), field, value) end
    end
  end
  for field, value in pairs(have) do
    if want[field] == nil then
      drift[#drift + 1] = {n, field, value, '0'}
      if fix then redis.call('HDEL', k_node(n), field) end
    end
  end
  local q = queued[n] or {}
  local members = redis.call('ZRANGE', k_queue(n), 0, -1, 'WITHSCORES')
  local same = #members == #q
  if same then
    local expect = {}
    for i = 1, #q, 2 do expect[q[i + 1]] = tonumber(q[i]) end
    for i = 1, #members, 2 do
      if expect[members[i]] ~= tonumber(members[i + 1]) then same = false end
    end
  end
  if not same then
    drift[#drift + 1] = {n, 'queue', num(#members / 2), num(#q / 2)}
    if fix then
      redis.call('DEL', k_queue(n))
      for i = 1, #q, 2000 do
        redis.call('ZADD', k_queue(n), unpack(q, i, math.min(i + 1999, #q)))
      end
    end
  end
end
return drift
