-- Replace the tree, keeping usage: ARGV = expected version ('' for any), spec (JSON),
-- nodes (JSON list of {name, path, parent, chain, guarded, mins, limits}), and the
-- resources some node names in max or min, tab-separated with a tab at each end.
-- The derived fields (usage, pending counts, what children are due) are recomputed from the job
-- records under the new tree, so nothing is lost; a tree that drops a node still holding
-- jobs is refused before anything is written. A max below what is in use is applied, as
-- Kubernetes' ResourceQuota takes a hard limit below its use: the admitted jobs stay, admission
-- refuses new ones until use falls below it; each such (node, resource, used, max) follows the
-- version in the reply, for the caller's warnings.
-- {1, version, node, resource, used, max, ...} applied | {2, version} same spec, nothing to do
-- | {0, 'version', current} | {0, 'admitted' | 'pending', node, job}
local expected, spec = ARGV[1], ARGV[2]
local current = redis.call('HGET', K_META, 'version') or '0'
if expected ~= '' and expected ~= current then return {0, 'version', current} end
if redis.call('HGET', K_META, 'spec') == spec then return {2, current} end
local nodes = cjson.decode(ARGV[3])
local by_name, names = {}, {}
for _, n in ipairs(nodes) do
  by_name[n.name] = n
  names[#names + 1] = n.name
end
local derived, queued, classes = derive(names, function(leaf)
  local n = by_name[leaf]
  return n and n.chain
end, function(name)
  local n = by_name[name]
  local mins = {}
  for _, r in ipairs(n.mins) do mins[r] = tonumber(n.limits['min:' .. r]) end
  return n.parent, mins
end, governed_set(ARGV[4]), function(name, resource)
  local limit = by_name[name].limits['max:' .. resource]
  return limit and tonumber(limit)
end)
if not derived then return {0, queued[1], queued[2], queued[3]} end
local over = {}
for _, n in ipairs(nodes) do
  for field, limit in pairs(n.limits) do
    if string.sub(field, 1, 4) == 'max:' then
      local resource = string.sub(field, 5)
      local used = derived[n.name]['used:' .. resource]
      if used and tonumber(used) > tonumber(limit) then
        over[#over + 1] = n.name
        over[#over + 1] = resource
        over[#over + 1] = tostring(used)
        over[#over + 1] = tostring(limit)
      end
    end
  end
end
-- all checks passed: write the new tree. Every parked job (park.lua) comes back in line, in
-- its old place: what refused it may be what changed (derive counted it already).
local parked_all = redis.call('HGETALL', K_PARKED)
for i = 1, #parked_all, 2 do
  local job = parked_all[i]
  local leaf = match(parked_all[i + 1], '^([^\t]*)')
  local rec = redis.call('HGET', K_PENDING, job)
  if rec then
    local _, score, seq = parse_record(rec)
    local member = member_of(seq, job)
    redis.call('ZREM', k_parked(leaf), member)
    redis.call('ZADD', k_queue(leaf), score, member)
  end
end
redis.call('DEL', K_PARKED)
local old = redis.call('SMEMBERS', K_NODES)
old[#old + 1] = IMPLICIT_ROOT
for _, name in ipairs(old) do redis.call('DEL', k_node(name)) end
-- The governed resources may have changed, and with them every job's class.
write_classes(old, {})
write_classes(names, classes)
redis.call('DEL', K_NODES)
for _, n in ipairs(nodes) do
  local fields = {'path', n.path, 'parent', n.parent, 'chain', table.concat(n.chain, '\t'),
                  'guarded', table.concat(n.guarded, '\t'), 'mins', table.concat(n.mins, '\t')}
  for field, limit in pairs(n.limits) do
    fields[#fields + 1] = field
    fields[#fields + 1] = limit
  end
  for field, value in pairs(derived[n.name]) do
    fields[#fields + 1] = field
    fields[#fields + 1] = value
  end
  redis.call('HSET', k_node(n.name), unpack(fields))
  redis.call('SADD', K_NODES, n.name)
end
local version = redis.call('HINCRBY', K_META, 'version', 1)
redis.call('HSET', K_META, 'spec', spec, 'resources', ARGV[4])
bump_epoch()
local reply = {1, version}
for _, value in ipairs(over) do reply[#reply + 1] = value end
return reply
