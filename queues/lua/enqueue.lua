-- Queue a job on a node: ARGV = job, leaf, score (-priority), resource, amount, ...
-- {1, seq} queued now | {2, state} already pending or admitted (nothing changes) | {-1, why}
local job, leaf, score = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', K_PENDING, job) == 1 then return {2, 'pending'} end
if redis.call('HEXISTS', K_ADMITTED, job) == 1 then return {2, 'admitted'} end
local chain, why = chain_of(leaf)
if not chain then return {-1, why} end
load_chain(chain)
local seq = next_seq()
local rec = {leaf, score, seq}
for i = 4, #ARGV do rec[#rec + 1] = ARGV[i] end
rec = table.concat(rec, '\t')
local _, _, _, req = parse_record(rec)
redis.call('HSET', K_PENDING, job, rec)
queue_add(leaf, score, member_of(seq, job), class_of(req))
local before = owed_before(chain)
count_pending(chain, req, 1)
settle_owed(chain, before)
flush()
bump_epoch()
return {1, seq}
