-- The heads of the request classes of some leaves (Keys.classes): ARGV = count, leaf, ...
-- Returns, per leaf asked, {leaf, {class, pending, member, score, ...}, ...}: every class
-- with pending jobs, its count, and its first `count` queue members with their scores
-- (-priority), head first. Reads only; one round trip for a dispatcher's whole cycle.
local count = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local leaf = ARGV[i]
  local classes = redis.call('HGETALL', k_classes(leaf))
  local entry = {leaf}
  for j = 1, #classes, 2 do
    local cls = classes[j]
    local row = {cls, classes[j + 1]}
    local top = redis.call('ZRANGE', k_cqueue(leaf, cls), 0, count - 1, 'WITHSCORES')
    for k = 1, #top do row[#row + 1] = top[k] end
    entry[#entry + 1] = row
  end
  out[#out + 1] = entry
end
return out
