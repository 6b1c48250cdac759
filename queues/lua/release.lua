-- Forget a finished or deleted job: ARGV = job.
-- {1, 'admitted'} its usage is released | {1, 'pending'} it left its queue | {0, 'absent'}
local job = ARGV[1]
local rec = redis.call('HGET', K_ADMITTED, job)
if rec then
  local leaf, _, _, req = parse_record(rec)
  local chain, why = chain_of(leaf)
  if not chain then return {-1, why} end
  local before = owed_before(chain)
  charge(chain, req, false)
  settle_owed(chain, before)
  redis.call('HDEL', K_ADMITTED, job)
  return {1, 'admitted'}
end
rec = redis.call('HGET', K_PENDING, job)
if rec then
  local leaf, _, seq = parse_record(rec)
  local chain, why = chain_of(leaf)
  if not chain then return {-1, why} end
  redis.call('ZREM', k_queue(leaf), member_of(seq, job))
  redis.call('HDEL', K_PENDING, job)
  local before = owed_before(chain)
  count_pending(chain, -1)
  settle_owed(chain, before)
  return {1, 'pending'}
end
return {0, 'absent'}
