-- One write of one fleet object: the fence, the precondition, the new resourceVersion, the
-- object hashes, the kind's indexes and the change stream, all or nothing.
--
-- KEYS[1]  the version counter (routes the script to the slot every key here shares)
-- ARGV[1]  op: 'put' or 'delete'
-- ARGV[2]  kind ('group/plural')
-- ARGV[3]  field ('namespace/name' or 'name')
-- ARGV[4]  expected resourceVersion: '' = must not exist, '*' = must exist (any version),
--          otherwise the exact version stored
-- ARGV[5]  the object's compressed JSON, without its resourceVersion: stored as '<rv>:<blob>'
-- ARGV[6]  the stream event type: ADDED, MODIFIED or DELETED
-- ARGV[7]  history: about how many changes the kind's stream keeps
-- ARGV[8]  fence key ('' = not fenced) and ARGV[9] the token it must hold
-- ARGV[10] the previous version's selector view for a MODIFIED ('' otherwise)
-- ARGV[11] '1' when the object is marked for deletion ('' otherwise): the stream entry says so,
--          so a reader after deletions only decodes those (absent from older entries), and the
--          kind's deleting index holds its field
-- ARGV[12] the object's member of the kind's involved index (Events only, '' otherwise) and
-- ARGV[13] the previous version's member ('' for a create); both from Python, which can read
--          the JSON (absent from older callers: no involved index is kept then)
--
-- Returns {'ok', rv} | {'fenced', ''} | {'exists', rv} | {'missing', ''} | {'conflict', rv}.

local op, kind, field, expected = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local body, event, history = ARGV[5], ARGV[6], ARGV[7]
local fence_key, fence_token, old = ARGV[8], ARGV[9], ARGV[10]
local deleting = ARGV[11] or ''
local involved, involved_old = ARGV[12] or '', ARGV[13] or ''

if fence_key ~= '' and redis.call('GET', fence_key) ~= fence_token then
  return {'fenced', ''}
end

local versions = k_versions(kind)
local current = redis.call('HGET', versions, field)
if expected == '' then
  if current then return {'exists', current} end
elseif not current then
  return {'missing', ''}
elseif expected ~= '*' and expected ~= current then
  return {'conflict', current}
end

local rv = string.format('%d', redis.call('INCR', K_VERSION))
if rv == '1' then
  -- The store's first write: every mark from now on goes through this script, so every kind's
  -- deleting index is complete (an older store has each kind's rebuilt once, see reindex.lua).
  redis.call('HSET', K_DELETING_KEPT, '*', '1')
end
body = rv .. ':' .. body

local objects, changes = k_objects(kind), k_changes(kind)
if op == 'put' then
  redis.call('HSET', objects, field, body)
  redis.call('HSET', versions, field, rv)
  if not current then
    -- A new field. (An update of a field the index lacks, data older than the index, leaves
    -- it short: the next read sees ZCARD ~= HLEN and has it rebuilt, see reindex.lua.)
    redis.call('ZADD', k_index(kind), 0, index_member(field))
  end
  if involved_old ~= involved and involved_old ~= '' then
    redis.call('ZREM', k_involved(kind), involved_old)
  end
  if involved ~= '' then
    -- In every write, not only when the member changes: a rebuild running meanwhile relies on
    -- it for the Events written after it read them (and on a bump it costs a lookup).
    redis.call('ZADD', k_involved(kind), 0, involved)
  end
  if deleting == '1' then redis.call('SADD', k_deleting(kind), field) end
else
  redis.call('HDEL', objects, field)
  redis.call('HDEL', versions, field)
  redis.call('ZREM', k_index(kind), index_member(field))
  redis.call('SREM', k_deleting(kind), field)
  if involved ~= '' then redis.call('ZREM', k_involved(kind), involved) end
  if involved_old ~= '' and involved_old ~= involved then
    redis.call('ZREM', k_involved(kind), involved_old)
  end
end

if deleting == '1' then
  redis.call('XADD', changes, rv .. '-0', 'type', event, 'object', body, 'old', old, 'deleting', '1')
else
  redis.call('XADD', changes, rv .. '-0', 'type', event, 'object', body, 'old', old)
end
if redis.call('XTRIM', changes, 'MAXLEN', '~', history) > 0 then
  -- Every change of the kind after the oldest one kept is in the stream: a watch may resume
  -- from one before it, not from older versions.
  local oldest = redis.call('XRANGE', changes, '-', '+', 'COUNT', 1)[1][1]
  local floor = tonumber(string.match(oldest, '^(%d+)')) - 1
  redis.call('HSET', K_FLOORS, kind, string.format('%d', floor))
end
return {'ok', rv}
