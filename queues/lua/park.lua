-- Take pending jobs out of line: ARGV = fence key ('' for none), fence token, why, job, ...
-- A parked job keeps its record in the pending hash (it is still waiting, in the same place
-- when it comes back) but leaves its leaf's queue and its class queue for the leaf's parked
-- set, and counts in no node's pending or want: it holds no head position, no guarantee is
-- owed for it, and no strict queue waits behind it (Kueue's inadmissible workloads, moved out
-- of the heap until something that could change the answer happens). Jobs not pending, or
-- parked already, are left as they are. Returns how many were parked, or -2 when the fence
-- token is not current (nothing changed).
if fenced(ARGV[1], ARGV[2]) then return -2 end
local why = ARGV[3]
local parked = 0
for i = 4, #ARGV do
  local job = ARGV[i]
  local rec = redis.call('HGET', K_PENDING, job)
  if rec and redis.call('HEXISTS', K_PARKED, job) == 0 then
    local leaf, score, seq, req = parse_record(rec)
    local chain = chain_of(leaf)
    if chain then
      load_chain(chain)
      local member = member_of(seq, job)
      queue_remove(leaf, member, class_of(req))
      redis.call('ZADD', k_parked(leaf), score, member)
      local before = owed_before(chain)
      count_pending(chain, req, -1)
      settle_owed(chain, before)
      redis.call('HSET', K_PARKED, job, leaf .. '\t' .. why)
      parked = parked + 1
    end
  end
end
flush()
if parked > 0 then bump_epoch() end
return parked
