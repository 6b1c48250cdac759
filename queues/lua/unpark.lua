-- Put parked jobs back in line (park.lua), in their old places: ARGV = fence key ('' for
-- none), fence token, why ('' for any), then the jobs ('' alone, or nothing: every parked job
-- of that why). Returns how many came back, or -2 when the fence token is not current.
if fenced(ARGV[1], ARGV[2]) then return -2 end
local why = ARGV[3]
local only = nil
if #ARGV > 3 and ARGV[4] ~= '' then
  only = {}
  for i = 4, #ARGV do only[ARGV[i]] = true end
end
local back = 0
local all = redis.call('HGETALL', K_PARKED)
for i = 1, #all, 2 do
  local job = all[i]
  local leaf, reason = match(all[i + 1], '^([^\t]*)\t(.*)$')
  if (why == '' or reason == why) and (only == nil or only[job]) then
    redis.call('HDEL', K_PARKED, job)
    local rec = redis.call('HGET', K_PENDING, job)
    if rec then
      local _, score, seq, req = parse_record(rec)
      local member = member_of(seq, job)
      redis.call('ZREM', k_parked(leaf), member)
      local chain = chain_of(leaf)
      if chain then
        load_chain(chain)
        queue_add(leaf, score, member, class_of(req))
        local before = owed_before(chain)
        count_pending(chain, req, 1)
        settle_owed(chain, before)
        back = back + 1
      end
    end
  end
end
flush()
if back > 0 then bump_epoch() end
return back
