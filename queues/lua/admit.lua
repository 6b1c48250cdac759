-- Admit jobs, each atomically over its leaf and every ancestor.
--   ARGV = fence key ('' for none), fence token, then
--     'pending', strict ('1' | '0'), job, job, ...: take each job from its pending queue,
--          or leave it there and say why; decided one after the other, exactly as if each
--          were its own script (a batch only saves round trips and reads)
--     'direct', job, leaf, score, resource, amount, ...: admit a job never queued
-- Each decision is one tab-separated string: '1 leaf' admitted now | '2 leaf' already
-- admitted | '0 ...' a refusal (see check; '0 order node head-job' under the strict
-- policy) | '-1 why'. 'pending' returns them joined by newlines, in one bulk string (a
-- client parses one string much faster than an array of them), 'direct' returns its one;
-- job ids in them are escaped (see escaped). Either returns '-2' when the fence token is
-- not current (nothing changed).
--
-- The decisions read and change the node fields in NODES (common.lua) and the job moves
-- below in TAKEN and friends; all of it is written at the end, in a few variadic calls.
if fenced(ARGV[1], ARGV[2]) then return '-2' end

local TAKEN = {}      -- job -> its leaf, admitted by this run
local ADMIT = {}      -- job, record, ... for one HSET of the admitted hash
local DROPPED = {}    -- jobs that left the pending hash
local LEFT = {}       -- leaf -> queue members that left it
local GONE = {}       -- member -> true once it left its queue
local CLASS_LEFT = {} -- leaf -> class -> queue members that left its class queue
local RUNNING = {}    -- leaf -> jobs admitted by this run, in order

-- A job id as it can go into a reply: any backslash doubled, any newline as \n.
local function escaped(job)
  if not find(job, '[\\\n]') then return job end
  return (string.gsub(string.gsub(job, '\\', '\\\\'), '\n', '\\n'))
end

-- The head of `leaf`'s queue as it is now, in this run: the members that left it in this
-- run are still in the sorted set, so skip them (at most #LEFT[leaf] of the first ones).
local function head_of(leaf)
  local left = LEFT[leaf]
  local top = redis.call('ZRANGE', k_queue(leaf), 0, left and #left or 0)
  for _, m in ipairs(top) do
    if not GONE[m] then return m end
  end
  return nil
end

local function decide(job, rec, from_queue, strict)
  local leaf, _, seq, req = parse_record(rec)
  note_request(req)
  local chain, why = chain_of(leaf)
  if not chain then return '-1\t' .. why end
  local member = member_of(seq, job)
  if strict then
    local head = head_of(leaf)
    if head ~= member then
      return '0\torder\t' .. path_of(leaf) .. '\t' .. (head and escaped(sub(head, 17)) or '')
    end
  end
  load_chain(chain)
  local refusal = check(chain, req)
  if refusal then return refusal end
  local before = owed_before(chain)
  if from_queue then
    local left = LEFT[leaf]
    if not left then left = {}; LEFT[leaf] = left end
    left[#left + 1] = member
    GONE[member] = true
    DROPPED[#DROPPED + 1] = job
    local by_class = CLASS_LEFT[leaf]
    if not by_class then by_class = {}; CLASS_LEFT[leaf] = by_class end
    local cls = class_of(req)
    local members = by_class[cls]
    if not members then members = {}; by_class[cls] = members end
    members[#members + 1] = member
    count_pending(chain, req, -1)
  end
  local running = RUNNING[leaf]
  if not running then running = {}; RUNNING[leaf] = running end
  running[#running + 1] = job
  charge(chain, req, 1)
  settle_owed(chain, before)
  TAKEN[job] = leaf
  ADMIT[#ADMIT + 1] = job
  ADMIT[#ADMIT + 1] = rec
  return '1\t' .. leaf
end

local function admitted_on(job)
  if TAKEN[job] then return '2\t' .. TAKEN[job] end
  local prior = redis.call('HGET', K_ADMITTED, job)
  return prior and '2\t' .. (parse_record(prior))
end

local function write()
  call_many('HDEL', K_PENDING, DROPPED, 1000)
  for leaf, members in pairs(LEFT) do call_many('ZREM', k_queue(leaf), members, 1000) end
  for leaf, by_class in pairs(CLASS_LEFT) do
    for cls, members in pairs(by_class) do
      call_many('ZREM', k_cqueue(leaf, cls), members, 1000)
      class_left(leaf, cls, #members)
    end
  end
  call_many('HSET', K_ADMITTED, ADMIT, 1000)
  for leaf, jobs in pairs(RUNNING) do running_add(leaf, jobs) end
  flush()
  if #ADMIT > 0 then bump_epoch() end
end

local mode = ARGV[3]
if mode == 'pending' then
  local strict, out = ARGV[4] == '1', {}
  local jobs = {}
  for i = 5, #ARGV do jobs[#jobs + 1] = ARGV[i] end
  local recs, parked = {}, {}
  for i = 1, #jobs, 1000 do
    local last = math.min(i + 999, #jobs)
    local part = redis.call('HMGET', K_PENDING, unpack(jobs, i, last))
    local out_of_line = redis.call('HMGET', K_PARKED, unpack(jobs, i, last))
    for k = 1, #part do
      recs[i + k - 1] = part[k]
      parked[i + k - 1] = out_of_line[k]
    end
  end
  for i, job in ipairs(jobs) do
    local rec = recs[i]
    if rec and parked[i] then
      out[i] = '-1\tjob ' .. escaped(job) .. ' is parked: out of line until what refuses it changes'
    elseif rec and not TAKEN[job] then
      out[i] = decide(job, rec, true, strict)
    else
      out[i] = admitted_on(job) or '-1\tjob ' .. escaped(job) .. ' is neither pending nor admitted'
    end
  end
  write()
  return table.concat(out, '\n')
end

local job, leaf = ARGV[4], ARGV[5]
local prior = admitted_on(job)
if prior then return prior end
if redis.call('HEXISTS', K_PENDING, job) == 1 then
  return '-1\tjob ' .. job .. ' is pending: admit it from its queue'
end
local chain, why = chain_of(leaf)
if not chain then return '-1\t' .. why end
local parts = {leaf, ARGV[6], next_seq()}
for i = 7, #ARGV do parts[#parts + 1] = ARGV[i] end
local decision = decide(job, table.concat(parts, '\t'), false, false)
write()
return decision
