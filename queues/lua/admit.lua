-- Admit jobs, each atomically over its leaf and every ancestor.
--   ARGV = 'pending', strict ('1' | '0'), job, job, ...: take each job from its pending
--          queue, or leave it there and say why; decided one after the other, exactly as
--          if each were its own script (a batch only saves round trips)
--   ARGV = 'direct', job, leaf, score, resource, amount, ...: admit a job never queued
-- Each decision is one tab-separated string: '1 leaf' admitted now | '2 leaf' already
-- admitted | '0 ...' a refusal (see check; '0 order node head-job' under the strict
-- policy) | '-1 why'. 'pending' returns an array of them, 'direct' a single one.
local governed = redis.call('HGET', K_META, 'resources')

local function decide(job, rec, from_queue, strict)
  local leaf, _, seq, req = parse_record(rec)
  local chain, why = chain_of(leaf)
  if not chain then return '-1\t' .. why end
  local member = member_of(seq, job)
  if strict then
    local head = redis.call('ZRANGE', k_queue(leaf), 0, 0)[1]
    if head ~= member then
      return '0\torder\t' .. path_of(leaf) .. '\t' .. (head and string.sub(head, 17) or '')
    end
  end
  local refusal = check(chain, req, governed)
  if refusal then return refusal end
  local before = owed_before(chain)
  if from_queue then
    redis.call('ZREM', k_queue(leaf), member)
    redis.call('HDEL', K_PENDING, job)
    count_pending(chain, -1)
  end
  charge(chain, req, true)
  settle_owed(chain, before)
  redis.call('HSET', K_ADMITTED, job, rec)
  return '1\t' .. leaf
end

local function admitted_on(job)
  local prior = redis.call('HGET', K_ADMITTED, job)
  return prior and '2\t' .. (parse_record(prior))
end

if ARGV[1] == 'pending' then
  local strict, out = ARGV[2] == '1', {}
  for i = 3, #ARGV do
    local job = ARGV[i]
    local rec = redis.call('HGET', K_PENDING, job)
    if rec then
      out[#out + 1] = decide(job, rec, true, strict)
    else
      out[#out + 1] = admitted_on(job) or '-1\tjob ' .. job .. ' is neither pending nor admitted'
    end
  end
  return out
end

local job, leaf = ARGV[2], ARGV[3]
local prior = admitted_on(job)
if prior then return prior end
if redis.call('HEXISTS', K_PENDING, job) == 1 then
  return '-1\tjob ' .. job .. ' is pending: admit it from its queue'
end
local chain, why = chain_of(leaf)
if not chain then return '-1\t' .. why end
local parts = {leaf, ARGV[4], string.format('%016d', redis.call('INCR', K_SEQ))}
for i = 5, #ARGV do parts[#parts + 1] = ARGV[i] end
return decide(job, table.concat(parts, '\t'), false, false)
