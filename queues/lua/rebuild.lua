-- Recompute every node's derived fields (usage, pending count, due) and the
-- queues from the job records, and compare them with what is stored: ARGV = fix ('1'
-- writes the recomputed values). Returns the drift as {node, field, stored, expected}
-- rows ('queue' compares a node's queue with its pending records by length), or
-- {-1, why} when a record names a node the tree does not hold.
local fix = ARGV[1] == '1'
local names = redis.call('SMEMBERS', K_NODES)
if #names == 0 then names = {IMPLICIT_ROOT} end
local chains = {}
local limits = {}
local parked = {}
local parked_all = redis.call('HGETALL', K_PARKED)
for i = 1, #parked_all, 2 do parked[parked_all[i]] = true end
local derived, queued, classes, running = derive(names, function(leaf)
  if chains[leaf] == nil then chains[leaf] = chain_of(leaf) or false end
  return chains[leaf] or nil
end, function(name)
  local v = redis.call('HMGET', k_node(name), 'parent', 'mins')
  local mins = {}
  for _, r in ipairs(split(v[2] or '')) do
    mins[r] = tonumber(redis.call('HGET', k_node(name), 'min:' .. r))
  end
  return v[1] or '', mins
end, governed_set(redis.call('HGET', K_META, 'resources')), function(name, resource)
  local key = name .. '\t' .. resource
  local limit = limits[key]
  if limit == nil then
    limit = tonumber(redis.call('HGET', k_node(name), 'max:' .. resource)) or false
    limits[key] = limit
  end
  return limit or nil
end, parked)
if not derived then
  return {-1, 'job ' .. queued[3] .. ' is ' .. queued[1] .. ' on ' .. queued[2] ..
              ', which the tree does not hold'}
end
local DERIVED = {used = true, due = true, want = true, kids = true}
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
  -- the class queues: the same members and scores, by class
  local want_classes = classes[n] or {}
  local stored_classes = redis.call('HGETALL', k_classes(n))
  local same_classes, have_total, want_total = true, 0, 0
  local counted = {}
  for i = 1, #stored_classes, 2 do
    local cls, count = stored_classes[i], tonumber(stored_classes[i + 1])
    have_total = have_total + count
    counted[cls] = true
    local cq = want_classes[cls]
    local zs = redis.call('ZRANGE', k_cqueue(n, cls), 0, -1, 'WITHSCORES')
    if not cq or #cq ~= #zs or count * 2 ~= #cq then
      same_classes = false
    else
      local expect = {}
      for j = 1, #cq, 2 do expect[cq[j + 1]] = tonumber(cq[j]) end
      for j = 1, #zs, 2 do
        if expect[zs[j]] ~= tonumber(zs[j + 1]) then same_classes = false end
      end
    end
  end
  for cls, cq in pairs(want_classes) do
    want_total = want_total + #cq / 2
    if not counted[cls] then same_classes = false end
  end
  if not same_classes then
    drift[#drift + 1] = {n, 'classes', num(have_total), num(want_total)}
    if fix then write_classes({n}, classes) end
  end
  -- the running index: the leaf's admitted jobs
  local want_running = {}
  for _, job in ipairs(running[n] or {}) do want_running[job] = true end
  local have_running = redis.call('ZRANGE', k_running(n), 0, -1)
  local same_running, extra = #have_running == #(running[n] or {}), {}
  for _, job in ipairs(have_running) do
    if not want_running[job] then
      same_running = false
      extra[#extra + 1] = job
    end
  end
  if not same_running then
    drift[#drift + 1] = {n, 'running', num(#have_running), num(#(running[n] or {}))}
    if fix then
      call_many('ZREM', k_running(n), extra, 1000)
      local missing = {}
      for _, job in ipairs(running[n] or {}) do
        if not redis.call('ZSCORE', k_running(n), job) then missing[#missing + 1] = job end
      end
      running_add(n, missing)
    end
  end
end
return drift
