-- Put an admitted job back in its queue, in its old place (same priority, same sequence):
-- ARGV = fence key ('' for none), fence token, job. {1, leaf} requeued | {2, state} not
-- admitted ('pending' or 'absent') | {-1, why} | {-2, 'fenced'} the fence token is not
-- current (nothing changed)
if fenced(ARGV[1], ARGV[2]) then return {-2, 'fenced'} end
local job = ARGV[3]
local rec = redis.call('HGET', K_ADMITTED, job)
if not rec then
  if redis.call('HEXISTS', K_PENDING, job) == 1 then return {2, 'pending'} end
  return {2, 'absent'}
end
local leaf, score, seq, req = parse_record(rec)
note_request(req)
local chain, why = chain_of(leaf)
if not chain then return {-1, why} end
load_chain(chain)
local before = owed_before(chain)
charge(chain, req, -1)
redis.call('HDEL', K_ADMITTED, job)
redis.call('ZREM', k_running(leaf), job)
redis.call('HSET', K_PENDING, job, rec)
queue_add(leaf, score, member_of(seq, job), class_of(req))
count_pending(chain, req, 1)
settle_owed(chain, before)
flush()
bump_epoch()
return {1, leaf}
