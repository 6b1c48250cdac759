-- Forget a finished or deleted job: ARGV = fence key ('' for none), fence token, job.
-- {1, 'admitted'} its usage is released | {1, 'pending'} it left its queue (or its parked
-- set) | {0, 'absent'}
-- | {-1, why} | {-2, 'fenced'} the fence token is not current (nothing changed)
if fenced(ARGV[1], ARGV[2]) then return {-2, 'fenced'} end
local job = ARGV[3]
local rec = redis.call('HGET', K_ADMITTED, job)
if rec then
  local leaf, _, _, req = parse_record(rec)
  note_request(req)
  local chain, why = chain_of(leaf)
  if not chain then return {-1, why} end
  load_chain(chain)
  local before = owed_before(chain)
  charge(chain, req, -1)
  settle_owed(chain, before)
  redis.call('HDEL', K_ADMITTED, job)
  redis.call('ZREM', k_running(leaf), job)
  flush()
  bump_epoch()
  return {1, 'admitted'}
end
rec = redis.call('HGET', K_PENDING, job)
if rec then
  local leaf, _, seq, req = parse_record(rec)
  if redis.call('HEXISTS', K_PARKED, job) == 1 then
    -- Out of line (park.lua): in no queue, counted nowhere.
    redis.call('HDEL', K_PARKED, job)
    redis.call('ZREM', k_parked(leaf), member_of(seq, job))
    redis.call('HDEL', K_PENDING, job)
    bump_epoch()
    return {1, 'pending'}
  end
  local chain, why = chain_of(leaf)
  if not chain then return {-1, why} end
  load_chain(chain)
  queue_remove(leaf, member_of(seq, job), class_of(req))
  redis.call('HDEL', K_PENDING, job)
  local before = owed_before(chain)
  count_pending(chain, req, -1)
  settle_owed(chain, before)
  flush()
  bump_epoch()
  return {1, 'pending'}
end
return {0, 'absent'}
