-- The rebuild of one of a kind's indexes, a batch at a time, driven from Python: the kind's
-- 'index' (list order, from the hash's field names), the Events' 'involved' index or the kind's
-- 'deleting' index (both from the objects' JSON, which Lua cannot read: it is compressed). One
-- rebuild of an index runs at a time (its lock, reindex:<index>:<kind>); each batch is short, so
-- Redis serves everyone else between batches however large the kind is.
--
-- KEYS[1]  the version counter (routes the script to the slot every key here shares)
-- ARGV[1]  kind
-- ARGV[2]  index: 'index' | 'involved' | 'deleting'
-- ARGV[3]  step: 'begin' | 'add' | 'end'
-- ARGV[4]  the rebuilder's token (its lock)
-- ARGV[5]  the lock's time to live, in milliseconds
--
-- 'begin'  take the lock if nobody holds it, then empty the index. Writers keep adding and
--          removing their own members meanwhile (the write script does, in every write), so
--          after the rebuild the index holds every object's member and nothing else.
--          Returns 1 when the lock was taken, 0 when another rebuild runs.
-- 'add'    'index': ARGV[6..] hash fields, each indexed if the object still exists (one that
--          was deleted since Python read the field has been unindexed by its writer).
--          'involved': ARGV[6..] (field, resourceVersion, member) triples, each member added
--          if its object is still at that version (one rewritten since Python read it has been
--          indexed by its writer, who adds its member in every write of an Event).
--          'deleting': ARGV[6..] (field, resourceVersion) pairs of objects marked for deletion,
--          each added if its object is still at that version (a mark is never taken back: one
--          rewritten since has been added by its writer, one deleted removed by it).
--          Returns 0, adding nothing, when the lock is no longer ours (it expired and another
--          rebuild began: this one stops).
-- 'end'    release the lock; returns 1 when the index is complete (as many members as objects;
--          the deleting index is complete once rebuilt, and deleting-kept says so from then on).

local kind, which, step, token, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lock = k_reindex(which, kind)
local index
if which == 'involved' then
  index = k_involved(kind)
elseif which == 'deleting' then
  index = k_deleting(kind)
else
  index = k_index(kind)
end

if step == 'begin' then
  if not redis.call('SET', lock, token, 'NX', 'PX', ttl) then return 0 end
  redis.call('DEL', index)
  return 1
end

if redis.call('GET', lock) ~= token then return 0 end

if step == 'add' then
  redis.call('PEXPIRE', lock, ttl)
  local versions = k_versions(kind)
  if which == 'deleting' then
    for i = 6, #ARGV, 2 do
      if redis.call('HGET', versions, ARGV[i]) == ARGV[i + 1] then
        redis.call('SADD', index, ARGV[i])
      end
    end
  elseif which == 'involved' then
    for i = 6, #ARGV, 3 do
      if redis.call('HGET', versions, ARGV[i]) == ARGV[i + 1] then
        redis.call('ZADD', index, 0, ARGV[i + 2])
      end
    end
  else
    for i = 6, #ARGV do
      if redis.call('HEXISTS', versions, ARGV[i]) == 1 then
        redis.call('ZADD', index, 0, index_member(ARGV[i]))
      end
    end
  end
  return 1
end

redis.call('DEL', lock)
if which == 'deleting' then
  redis.call('HSET', K_DELETING_KEPT, kind, '1')
  return 1
end
if redis.call('ZCARD', index) == redis.call('HLEN', k_objects(kind)) then return 1 end
return 0
