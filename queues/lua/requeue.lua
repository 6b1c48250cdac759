-- Put an admitted job back in its queue, in its old place (same priority, same sequence):
-- ARGV = job. {1, leaf} requeued | {2, state} not admitted ('pending' or 'absent') | {-1, why}
local job = ARGV[1]
local rec = redis.call('HGET', K_ADMITTED, job)
if not rec then
  if redis.call('HEXISTS', K_PENDING, job) == 1 then return {2, 'pending'} end
  return {2, 'absent'}
end
local leaf, score, seq, req = parse_record(rec)
local chain, why = chain_of(leaf)
if not chain then return {-1, why} end
local before = owed_before(chain)
charge(chain, req, false)
redis.call('HDEL', K_ADMITTED, job)
redis.call('HSET', K_PENDING, job, rec)
redis.call('ZADD', k_queue(leaf), score, member_of(seq, job))
count_pending(chain, 1)
settle_owed(chain, before)
return {1, leaf}
