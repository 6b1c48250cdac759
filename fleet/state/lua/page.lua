-- One read of a list page: a window of a kind's objects in list order, read in one atomic step
-- with the version counter and the kind's floor (so the first window of a list is exactly the
-- state at the version the list reports).
--
-- KEYS[1]  the version counter (routes the script to the slot every key here shares)
-- ARGV[1]  kind ('group/plural')
-- ARGV[2]  mode, and its arguments:
--   'range'     ARGV[3], ARGV[4]: ZRANGEBYLEX bounds over index:<kind>; ARGV[5]: at most this
--               many members (-1: all); ARGV[6]: '' or a name: then only the objects of that
--               name (in any namespace), read from the whole range at once
--   'involved'  ARGV[3], ARGV[4]: ZRANGEBYLEX bounds over involved:<kind>, all of them
--   'fields'    ARGV[3..]: hash fields
--
-- Returns {version, floor, status, members, values}: status 'ok', or 'unindexed' when the
-- index the mode reads is not complete (nothing more is read: the caller reads the kind's hash
-- instead and has the index rebuilt, a batch at a time, with reindex.lua). values[i] is the
-- stored object of members[i] (for 'fields', of ARGV[2 + i]); false where there is none.
--
-- An index is complete when it has as many members as the object hash has fields: the write
-- script keeps it so. Data written before the index existed (or by an older writer during a
-- rolling upgrade) leaves it short, or long; two O(1) reads tell.

local kind, mode = ARGV[1], ARGV[2]
local objects = k_objects(kind)
local version = redis.call('GET', K_VERSION)
local floor = redis.call('HGET', K_FLOORS, kind)

-- HMGET of many fields, in chunks that Lua's unpack() takes.
local function hmget(fields)
  local values = {}
  for first = 1, #fields, 1000 do
    local last = math.min(first + 999, #fields)
    local chunk = redis.call('HMGET', objects, unpack(fields, first, last))
    for i = 1, #chunk do values[#values + 1] = chunk[i] end
  end
  return values
end

if mode == 'fields' then
  local fields = {}
  for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
  return {version, floor, 'ok', fields, hmget(fields)}
end

if mode == 'involved' then
  local involved = k_involved(kind)
  if redis.call('ZCARD', involved) ~= redis.call('HLEN', objects) then
    return {version, floor, 'unindexed', {}, {}}
  end
  local members = redis.call('ZRANGEBYLEX', involved, ARGV[3], ARGV[4])
  local fields = {}
  for i = 1, #members do
    -- involvedName \0 involvedNamespace \0 namespace \0 name
    local a = string.find(members[i], '\0', 1, true)
    local b = string.find(members[i], '\0', a + 1, true)
    fields[i] = member_field(string.sub(members[i], b + 1))
  end
  return {version, floor, 'ok', members, hmget(fields)}
end

-- 'range'
local index = k_index(kind)
if redis.call('ZCARD', index) ~= redis.call('HLEN', objects) then
  return {version, floor, 'unindexed', {}, {}}
end
local name = ARGV[6] or ''
local members
if name == '' then
  members = redis.call('ZRANGEBYLEX', index, ARGV[3], ARGV[4], 'LIMIT', 0, tonumber(ARGV[5]))
else
  members = {}
  local suffix = '\0' .. name
  for _, member in ipairs(redis.call('ZRANGEBYLEX', index, ARGV[3], ARGV[4])) do
    if string.sub(member, -#suffix) == suffix then members[#members + 1] = member end
  end
end
local fields = {}
for i = 1, #members do fields[i] = member_field(members[i]) end
return {version, floor, 'ok', members, hmget(fields)}
