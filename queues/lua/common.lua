-- Shared by every quota script (prepended after the key names and constants that
-- queues/scripts.py generates).
--
-- Job records are tab-separated: leaf, score (-priority), sequence (16 digits), then
-- resource/amount pairs; every job also counts 1 of max-jobs, which parse_record adds.
--
-- Each node is one hash (k_node): its static part (path, parent, chain up to the root,
-- guarded = children that have a min, mins = the resources its min names, max:<r>, min:<r>)
-- written by apply.lua, and its derived part, which only these scripts change and which
-- apply.lua and rebuild.lua recompute from the job records:
--   used:<r>  what its subtree's admitted jobs use (used:kube-queue/max-jobs = their count)
--   pending   how many jobs its subtree has queued (that could ever be admitted: fits_ever)
--   want:<r>  (leaves) what those jobs ask for in all, per resource some node limits
--   kids:<r>  (inner nodes) the sum over its children of what each could take (below)
--   due:<r>   the sum over its children of what each is owed (below)
-- so that the borrowing rule reads one number at the parent instead of walking siblings.
--
-- What a node could take of r for its waiting jobs (could_take): its want (a leaf) or
-- kids (an inner node), no more than its max of r leaves room for, and nothing while it is
-- at its max-jobs. What it is owed: that, up to its unused guarantee (min - used), while it
-- has jobs pending. A guarantee its waiting jobs could not use anyway (their leaf or group
-- is at its max or max-jobs) is not held back from borrowers.
--
-- Cost: a script run reads each node it touches once (one HMGET of every field a decision
-- may need, see ensure) and keeps it in NODES; every change goes to NODES and is written at
-- the end of the run by flush, one HSET per changed node, so that a batch of decisions
-- costs one read and at most one write per distinct node instead of one call per field,
-- node and decision. Nothing is written before flush (bar the rare case below), so a
-- script that stops half-way through a batch leaves nothing half-done.
--
-- Exactness: Lua numbers are doubles, exact below 2^53. Every amount in a record and
-- every limit is below 2^53, so comparisons are exact and so is every counter the scripts
-- add up while it stays below 2^53 (used <= max keeps a limited counter there; due sums
-- children's mins, which validation keeps within the parent's). A counter that would leave
-- that range (say the bytes of memory under an unlimited node) is handed to Redis's exact
-- int64 HINCRBY instead and kept as its decimal string.

local find, sub, match, gmatch, format = string.find, string.sub, string.match, string.gmatch, string.format
local EXACT = 9007199254740992  -- 2^53

local function split(s)
  local out, start = {}, 1
  while true do
    local tab = find(s, '\t', start, true)
    if not tab then
      if start <= #s then out[#out + 1] = sub(s, start) end
      return out
    end
    if tab > start then out[#out + 1] = sub(s, start, tab - 1) end
    start = tab + 1
  end
end

local function num(n) return format('%d', n) end

-- leaf, score, seq and the request as a flat list {resource, amount, ...} (amounts as
-- numbers) that ends with max-jobs 1.
local function parse_record(rec)
  local leaf, score, seq, rest = match(rec, '^([^\t]*)\t([^\t]*)\t([^\t]*)(.*)$')
  local req, n = {}, 0
  for r, a in gmatch(rest, '\t([^\t]+)\t([^\t]+)') do
    req[n + 1], req[n + 2] = r, tonumber(a)
    n = n + 2
  end
  req[n + 1], req[n + 2] = MAX_JOBS, 1
  return leaf, score, seq, req
end

local function member_of(seq, job) return seq .. job end

-- The next submission sequence: the server's clock in microseconds, or one more than the last
-- sequence if that is not before it, as 16 digits. So it orders submissions (the tie-break
-- between equal priorities) and also says when a job was queued (queues/heads.py, Head), which
-- the scheduler's fairness between job sizes needs. (Sequences before this were plain counters,
-- far below any clock reading: those jobs keep their places and have no submission time.)
local function next_seq()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local stored = redis.call('GET', K_SEQ)
  if not stored then
    -- The first job this ledger ever holds: no derived field was written before it, in any
    -- shape, so it is in the current one (Ledger.upgrade has nothing to recompute).
    redis.call('HSETNX', K_META, 'layout', LAYOUT)
  end
  local last = tonumber(stored or '0')
  local seq = math.max(last + 1, now)
  redis.call('SET', K_SEQ, format('%d', seq))
  return format('%016d', seq)
end

-- Every script that changes usage, pending jobs or the tree bumps the meta field `epoch`, so
-- a reader can tell in one HGET whether anything changed since it last looked; and puts one
-- element in the wake list when it has none, so that a reader waiting for a change (an idle
-- dispatcher's BLPOP) wakes at once. While no one waits the list keeps that one element and a
-- bump costs one LLEN.
local function bump_epoch()
  redis.call('HINCRBY', K_META, 'epoch', 1)
  if redis.call('LLEN', K_WAKE) == 0 then redis.call('RPUSH', K_WAKE, '1') end
end

-- Variadic commands in slices, so that no unpack() outgrows the Lua stack.
local function call_many(command, key, args, width)
  for i = 1, #args, width do
    redis.call(command, key, unpack(args, i, math.min(i + width - 1, #args)))
  end
end

-- Fencing: a write that must come from the current holder of a lease carries the lease key
-- and the token it was given; '' as the key means no fence.
local function fenced(key, token)
  return key ~= '' and redis.call('GET', key) ~= token
end

-- Node fields in a script run. A node's fields are read in one HMGET of the run's field
-- list ROW and kept as that reply, a row addressed by position (IX[field]): no per-field
-- table to build for each node read, and integer keys where the decisions look. ROW starts
-- with what an admission, a release or a queue change may look at (see prepare) and grows
-- when a field new to the run is asked for; every node read from then on reads it too.
local ROW, IX = {}, {}
local function column(f)
  local i = IX[f]
  if not i then
    i = #ROW + 1
    ROW[i], IX[f] = f, i
  end
  return i
end

-- Positions of 'max:<r>', 'min:<r>', 'used:<r>', 'due:<r>' per resource (made on first use).
local function columns(prefix)
  return setmetatable({}, {__index = function(t, r)
    local i = column(prefix .. r)
    t[r] = i
    return i
  end})
end
local MAX, MIN, USED, DUE = columns('max:'), columns('min:'), columns('used:'), columns('due:')
local WANT, KIDS = columns('want:'), columns('kids:')
local C_CHAIN, C_PATH, C_MINS, C_GUARDED, C_PENDING

-- GOVERNED: the resources some node of the applied tree names (meta field `resources`).
-- Their max, min, used and due are in ROW from the start; the used:<r> of other resources
-- (no node limits them, but their usage is kept) join it as requests name them.
local GOVERNED = nil
local function prepare()
  if GOVERNED then return end
  GOVERNED = {}
  C_CHAIN, C_PATH, C_MINS = column('chain'), column('path'), column('mins')
  C_GUARDED, C_PENDING = column('guarded'), column('pending')
  local _ = MAX[MAX_JOBS] + USED[MAX_JOBS]
  local governed = redis.call('HGET', K_META, 'resources')
  if governed then
    for _, r in ipairs(split(governed)) do
      GOVERNED[r] = true
      local _ = MAX[r] + MIN[r] + USED[r] + DUE[r] + WANT[r] + KIDS[r]
    end
  end
end

-- A job's request class (keys.py, Keys.classes): what it asks of the governed resources,
-- 'resource=amount' joined by commas in the record's (sorted) order, '-' for nothing. Jobs
-- of one class of one leaf get the same quota answer at the same moment.
local function class_of(req, governed)
  if not governed then
    prepare()
    governed = GOVERNED
  end
  local parts = {}
  for k = 1, #req, 2 do
    local r, a = req[k], req[k + 1]
    if a ~= 0 and r ~= MAX_JOBS and governed[r] then parts[#parts + 1] = r .. '=' .. num(a) end
  end
  if #parts == 0 then return '-' end
  return table.concat(parts, ',')
end

-- The leaf's queue changed: give it a new version (Keys.queue_versions).
local function queue_touched(leaf)
  redis.call('HSET', K_QVERSIONS, leaf, redis.call('HINCRBY', K_META, 'qversion', 1))
end

-- Put a pending job in its leaf's queue and its class queue, or take it out of both.
local function queue_add(leaf, score, member, cls)
  redis.call('ZADD', k_queue(leaf), score, member)
  redis.call('ZADD', k_cqueue(leaf, cls), score, member)
  redis.call('HINCRBY', k_classes(leaf), cls, 1)
  queue_touched(leaf)
end
local function class_left(leaf, cls, count)
  if redis.call('HINCRBY', k_classes(leaf), cls, -count) <= 0 then
    redis.call('HDEL', k_classes(leaf), cls)
  end
  queue_touched(leaf)
end
local function queue_remove(leaf, member, cls)
  redis.call('ZREM', k_queue(leaf), member)
  redis.call('ZREM', k_cqueue(leaf, cls), member)
  class_left(leaf, cls, 1)
end

-- The running index (Keys.running): admitted jobs by leaf, scored by admission number.
local function running_add(leaf, jobs)
  if #jobs == 0 then return end
  local last = redis.call('HINCRBY', K_META, 'admissions', #jobs)
  local args = {}
  for i, job in ipairs(jobs) do
    args[#args + 1] = num(last - #jobs + i)
    args[#args + 1] = job
  end
  for i = 1, #args, 2000 do
    redis.call('ZADD', k_running(leaf), unpack(args, i, math.min(i + 1999, #args)))
  end
end

-- NODES[n]: node n's row, changed in place by the scripts; LOADED[n]: how much of ROW it
-- holds. Absent fields are false; integers are decimal strings as read, numbers once
-- changed here. DIRTY[n] holds the positions changed, which flush writes out at the end.
local NODES, LOADED, DIRTY, DIRTY_ORDER = {}, {}, {}, {}

-- Node `n`'s row, with every field of ROW: read whole the first time, then only what ROW
-- gained since.
local function ensure(n)
  prepare()
  local have, want = LOADED[n] or 0, #ROW
  if have == want then return NODES[n] end
  local v = redis.call('HMGET', k_node(n), unpack(ROW, have + 1, want))
  if have == 0 then
    NODES[n] = v
  else
    local row = NODES[n]
    for i = 1, want - have do row[have + i] = v[i] end
  end
  LOADED[n] = want
  return NODES[n]
end

local function field_of(n, i)
  local row = NODES[n]
  if not row or LOADED[n] < i then row = ensure(n) end
  return row[i]
end

-- Call with each request before reading its chain, so that the used:<r> of what it asks
-- are read with the nodes.
local function note_request(req)
  prepare()
  for k = 1, #req, 2 do
    if req[k + 1] ~= 0 then local _ = USED[req[k]] end
  end
end

-- Add `delta` (an integer below 2^53 in magnitude) to the counter at position `i` of node
-- `n`.
local function add(n, i, delta)
  local row = NODES[n]
  if not row or LOADED[n] < i then row = ensure(n) end
  local x = tonumber(row[i]) or 0
  local new = x + delta
  if x < EXACT and x > -EXACT and new < EXACT and new > -EXACT then
    row[i] = new
    local d = DIRTY[n]
    if not d then
      d = {}
      DIRTY[n] = d
      DIRTY_ORDER[#DIRTY_ORDER + 1] = n
    end
    d[i] = true
    return
  end
  -- Beyond 2^53: let Redis add exactly (int64). What it holds is exact: a string from it,
  -- or first the number changed here. Its integer reply would come back as a double, so
  -- read the sum back as a string.
  local key, f = k_node(n), ROW[i]
  if DIRTY[n] and DIRTY[n][i] then
    redis.call('HSET', key, f, num(x))
    DIRTY[n][i] = nil
  end
  redis.call('HINCRBY', key, f, num(delta))
  row[i] = redis.call('HGET', key, f)
end

-- Write every changed node field: one HSET per node.
local function flush()
  for k = 1, #DIRTY_ORDER do
    local n = DIRTY_ORDER[k]
    local args, row = {}, NODES[n]
    for i in pairs(DIRTY[n]) do
      args[#args + 1] = ROW[i]
      args[#args + 1] = num(row[i])
    end
    if #args > 0 then redis.call('HSET', k_node(n), unpack(args)) end
  end
  DIRTY, DIRTY_ORDER = {}, {}
end

-- The chain of node names from `leaf` up to the root, or nil and why not.
local CHAINS = {}
local function chain_of(leaf)
  local known = CHAINS[leaf]
  if known then return known end
  local chain = ensure(leaf)[C_CHAIN]
  if chain then
    CHAINS[leaf] = split(chain)
    return CHAINS[leaf]
  end
  if redis.call('HEXISTS', K_META, 'version') == 1 then
    return nil, 'quota node ' .. leaf .. ' is not in the applied ElasticQuotaTree'
  end
  if leaf == IMPLICIT_ROOT then
    CHAINS[leaf] = {IMPLICIT_ROOT}
    return CHAINS[leaf]
  end
  return nil, 'no ElasticQuotaTree is applied: jobs go to the implicit ' .. IMPLICIT_ROOT .. ', not ' .. leaf
end

-- Read every node of `chain` before deciding on it or changing it.
local function load_chain(chain)
  for i = 1, #chain do ensure(chain[i]) end
end

local function charge(chain, req, sign)
  for k = 1, #req, 2 do
    local amount = req[k + 1]
    if amount ~= 0 then
      local i, delta = USED[req[k]], sign * amount
      for j = 1, #chain do add(chain[j], i, delta) end
    end
  end
end

-- Whether a job asking `req` could ever be admitted on `chain` (read by load_chain): within
-- every max of the chain with nothing else admitted. One that never could waits in its queue
-- (its reason says why) but is not counted as pending: a leaf must not be owed a guarantee for
-- a job that can never use it, or its siblings could never borrow (DESIGN.md, invariant 5: bad
-- input changes nothing else). Applying a tree recomputes which jobs count (derive).
local function fits_ever(chain, req)
  prepare()
  for k = 1, #req, 2 do
    local r, amount = req[k], req[k + 1]
    if amount > 0 and GOVERNED[r] then
      local c = MAX[r]
      for j = 1, #chain do
        local max = field_of(chain[j], c)
        if max and amount > tonumber(max) then return false end
      end
    end
  end
  return true
end

local function count_pending(chain, req, delta)
  if not fits_ever(chain, req) then return end
  for j = 1, #chain do add(chain[j], C_PENDING, delta) end
  for k = 1, #req, 2 do
    local r, amount = req[k], req[k + 1]
    if amount > 0 and r ~= MAX_JOBS and GOVERNED[r] then add(chain[1], WANT[r], delta * amount) end
  end
end

-- The resources node `n`'s min names (an empty list when none).
local MINS = {}
local function mins_of(n)
  local m = MINS[n]
  if not m then
    local mins = field_of(n, C_MINS)
    m = (mins and mins ~= '') and split(mins) or {}
    MINS[n] = m
  end
  return m
end

-- The governed resources but max-jobs, sorted: those a node's could_take is kept for.
local KEPT = nil
local function kept()
  if not KEPT then
    prepare()
    KEPT = {}
    for r in pairs(GOVERNED) do
      if r ~= MAX_JOBS then KEPT[#KEPT + 1] = r end
    end
    table.sort(KEPT)
  end
  return KEPT
end

-- What node `n` could take of resource `r` for its waiting jobs (see the header).
local function could_take(n, r)
  local jobs = field_of(n, MAX[MAX_JOBS])
  if jobs and (tonumber(field_of(n, USED[MAX_JOBS])) or 0) >= tonumber(jobs) then return 0 end
  local want = (tonumber(field_of(n, WANT[r])) or 0) + (tonumber(field_of(n, KIDS[r])) or 0)
  local max = field_of(n, MAX[r])
  if max then
    local room = tonumber(max) - (tonumber(field_of(n, USED[r])) or 0)
    if room < want then want = room end
  end
  if want < 0 then return 0 end
  return want
end

-- What node `n` (read by load_chain) is owed in resource `r`: what it could take for its
-- waiting jobs, up to its unused guarantee (min - used). Guarantee that no waiting job
-- could use is not held back from borrowers. Computed from its row, never stored: the
-- parent's due:<r> is the only stored sum.
local function owed(n, r)
  local row = NODES[n]
  if (tonumber(row[C_PENDING]) or 0) <= 0 then return 0 end
  local min, used = tonumber(row[MIN[r]]) or 0, tonumber(row[USED[r]]) or 0
  if used >= min then return 0 end
  return math.min(min - used, could_take(n, r))
end

-- Call before changing usage or pending counts along `chain`, then settle_owed after it:
-- every change in what a node could take is folded into its parent's kids:<r>, bottom up,
-- and every change in what it is owed into its parent's due:<r>.
local function owed_before(chain)
  local before, k = {}, 0
  local rs = kept()
  for i = 1, #chain - 1 do
    for j = 1, #rs do
      k = k + 1
      before[k] = could_take(chain[i], rs[j])
    end
    local mins = mins_of(chain[i])
    for j = 1, #mins do
      k = k + 1
      before[k] = owed(chain[i], mins[j])
    end
  end
  return before
end
local function settle_owed(chain, before)
  local k = 0
  local rs = kept()
  local owed_at = {}
  for i = 1, #chain - 1 do
    for j = 1, #rs do
      k = k + 1
      local now = could_take(chain[i], rs[j])
      if now ~= before[k] then add(chain[i + 1], KIDS[rs[j]], now - before[k]) end
    end
    owed_at[i] = k
    k = k + #mins_of(chain[i])
  end
  for i = 1, #chain - 1 do
    local mins = mins_of(chain[i])
    k = owed_at[i]
    for j = 1, #mins do
      k = k + 1
      local now = owed(chain[i], mins[j])
      if now ~= before[k] then add(chain[i + 1], DUE[mins[j]], now - before[k]) end
    end
  end
end

-- Exact sums beyond 2^53: a high part (units of 1e9) and a low part (amounts are >= 0).
local BILLION = 1000000000
local function acc_add(acc, n)
  local lo = acc[2] + n % BILLION
  local carry = math.floor(lo / BILLION)
  acc[1] = acc[1] + math.floor(n / BILLION) + carry
  acc[2] = lo - carry * BILLION
end
local function acc_num(acc) return acc[1] * BILLION + acc[2] end
local function acc_str(acc)
  if acc[1] == 0 then return num(acc[2]) end
  return format('%d%09d', acc[1], acc[2])
end

-- The derived fields of every node as the job records say they should be.
--   names: every node; chain_fn(leaf) -> chain or nil; info_fn(name) -> parent ('' for
--   the root) and {resource = min} for the resources its min names; governed: the set of
--   resources the tree limits (for the request classes); limit_fn(name, resource) -> the
--   node's max of it (a number) or nil (for which pending jobs count, see fits_ever).
-- Returns derived[node] = {field = decimal string} (zeros left out),
-- queued[leaf] = {score, member, ...}, classes[leaf][class] = {score, member, ...} and
-- running[leaf] = {job, ...}; or nil and {kind, leaf, job} for the first job whose leaf
-- has no node. `parked` (job -> true, park.lua) leaves those jobs out of every queue and count.
local function derive(names, chain_fn, info_fn, governed, limit_fn, parked)
  parked = parked or {}
  local used, pending, queued, classes, running, want = {}, {}, {}, {}, {}, {}
  local admitted = redis.call('HGETALL', K_ADMITTED)
  for i = 1, #admitted, 2 do
    local leaf, _, _, req = parse_record(admitted[i + 1])
    local chain = chain_fn(leaf)
    if not chain then return nil, {'admitted', leaf, admitted[i]} end
    local r = running[leaf]
    if not r then r = {}; running[leaf] = r end
    r[#r + 1] = admitted[i]
    for _, n in ipairs(chain) do
      local u = used[n]
      if not u then u = {}; used[n] = u end
      for k = 1, #req, 2 do
        if req[k + 1] ~= 0 then
          local acc = u[req[k]]
          if not acc then acc = {0, 0}; u[req[k]] = acc end
          acc_add(acc, req[k + 1])
        end
      end
    end
  end
  local records = redis.call('HGETALL', K_PENDING)
  for i = 1, #records, 2 do
    local leaf, score, seq, req = parse_record(records[i + 1])
    local chain = chain_fn(leaf)
    if not chain then return nil, {'pending', leaf, records[i]} end
    -- A parked job (park.lua) is in no queue and counted nowhere.
    local counted = not parked[records[i]]  -- and as fits_ever, under the tree derived for
    for k = 1, #req, 2 do
      local r, amount = req[k], req[k + 1]
      if counted and amount > 0 and governed[r] then
        for _, n in ipairs(chain) do
          local max = limit_fn(n, r)
          if max and amount > max then counted = false end
        end
      end
    end
    if counted then
      for _, n in ipairs(chain) do pending[n] = (pending[n] or 0) + 1 end
      for k = 1, #req, 2 do
        local r, amount = req[k], req[k + 1]
        if amount > 0 and r ~= MAX_JOBS and governed[r] then
          local w = want[leaf]
          if not w then w = {}; want[leaf] = w end
          local acc = w[r]
          if not acc then acc = {0, 0}; w[r] = acc end
          acc_add(acc, amount)
        end
      end
    end
    if not parked[records[i]] then
      local q = queued[leaf]
      if not q then q = {}; queued[leaf] = q end
      local member = member_of(seq, records[i])
      q[#q + 1] = score
      q[#q + 1] = member
      local by_class = classes[leaf]
      if not by_class then by_class = {}; classes[leaf] = by_class end
      local cls = class_of(req, governed)
      local c = by_class[cls]
      if not c then c = {}; by_class[cls] = c end
      c[#c + 1] = score
      c[#c + 1] = member
    end
  end
  local derived, due, parents, mins_by, children = {}, {}, {}, {}, {}
  for _, n in ipairs(names) do
    derived[n] = {}
    due[n] = {}
    parents[n], mins_by[n] = info_fn(n)
  end
  for _, n in ipairs(names) do
    local p = parents[n]
    if p ~= '' then
      local c = children[p]
      if not c then c = {}; children[p] = c end
      c[#c + 1] = n
    end
  end
  local function used_of(n, r)
    return used[n] and used[n][r] and acc_num(used[n][r]) or 0
  end
  -- What each node could take for its waiting jobs (could_take), its children first.
  local took = {}
  local function take(n)
    if took[n] then return took[n] end
    local base = {}
    for r, acc in pairs(want[n] or {}) do base[r] = acc_num(acc) end
    local kids = {}
    for _, c in ipairs(children[n] or {}) do
      for r, a in pairs(take(c)) do kids[r] = (kids[r] or 0) + a end
    end
    for r, a in pairs(kids) do
      if a > 0 then derived[n]['kids:' .. r] = num(a) end
      base[r] = (base[r] or 0) + a
    end
    local out = {}
    local jobs = limit_fn(n, MAX_JOBS)
    if not (jobs and used_of(n, MAX_JOBS) >= jobs) then
      for r, a in pairs(base) do
        local max = limit_fn(n, r)
        if max and max - used_of(n, r) < a then a = max - used_of(n, r) end
        if a > 0 then out[r] = a end
      end
    end
    took[n] = out
    return out
  end
  for _, n in ipairs(names) do
    local d = derived[n]
    for r, acc in pairs(used[n] or {}) do d['used:' .. r] = acc_str(acc) end
    if pending[n] then d['pending'] = num(pending[n]) end
    for r, acc in pairs(want[n] or {}) do d['want:' .. r] = acc_str(acc) end
    local parent = parents[n]
    if parent ~= '' and pending[n] then
      local could = take(n)
      for r, min in pairs(mins_by[n]) do
        local have, wants = used_of(n, r), could[r] or 0
        if have < min and wants > 0 then
          due[parent][r] = (due[parent][r] or 0) + math.min(min - have, wants)
        end
      end
    end
  end
  for _, n in ipairs(names) do take(n) end
  for n, sums in pairs(due) do
    for r, amount in pairs(sums) do derived[n]['due:' .. r] = num(amount) end
  end
  return derived, queued, classes, running
end

-- The class queues of `leaves` as `classes` (from derive) says they should be: the old ones
-- deleted, the new ones written.
local function write_classes(leaves, classes)
  for _, leaf in ipairs(leaves) do
    local old = redis.call('HKEYS', k_classes(leaf))
    for _, cls in ipairs(old) do redis.call('DEL', k_cqueue(leaf, cls)) end
    redis.call('DEL', k_classes(leaf))
    for cls, q in pairs(classes[leaf] or {}) do
      for i = 1, #q, 2000 do
        redis.call('ZADD', k_cqueue(leaf, cls), unpack(q, i, math.min(i + 1999, #q)))
      end
      redis.call('HSET', k_classes(leaf), cls, num(#q / 2))
    end
    queue_touched(leaf)
  end
end

-- The governed set of a meta `resources` value ('\tr1\tr2\t').
local function governed_set(resources)
  local out = {}
  for _, r in ipairs(split(resources or '')) do out[r] = true end
  return out
end

local function path_of(name) return field_of(name, C_PATH) or name end

-- The first child of `parent` other than `node` that is owed `resource`, for the reason.
-- (Children are read whole, as a decision on them would, so that a later one finds them.)
local GUARDED = {}
local function owed_sibling(parent, node, resource)
  local guarded = GUARDED[parent]
  if not guarded then
    guarded = split(field_of(parent, C_GUARDED) or '')
    GUARDED[parent] = guarded
  end
  local c_used, c_min = USED[resource], MIN[resource]
  for i = 1, #guarded do
    local s = guarded[i]
    if s ~= node then
      local row = ensure(s)
      local have, min = tonumber(row[c_used]) or 0, tonumber(row[c_min]) or 0
      local pending = tonumber(row[C_PENDING]) or 0
      if pending > 0 and have < min and owed(s, resource) > 0 then
        return path_of(s), num(have), num(min), num(pending)
      end
    end
  end
  return '?', '0', '0', '0'
end

-- The admission check over `chain` (leaf first, read by load_chain) for `req` (which
-- includes max-jobs 1). Returns nil when the job may be admitted, else the refusal as one
-- tab-separated reply (one bulk string is far cheaper for a client to parse than an
-- array), nodes as paths:
--   0 max node resource used requested max
--   0 min node resource used requested min sibling sibling-used sibling-min sibling-pending
-- Only governed resources (those some node names) can refuse, so only those are looked
-- at, leaf first, stopping at the first node whose max refuses.
local function check(chain, req)
  prepare()
  local names, amounts, maxes, mins, useds, dues, m = {}, {}, {}, {}, {}, {}, 0
  for k = 1, #req, 2 do
    local r, amount = req[k], req[k + 1]
    if amount > 0 and GOVERNED[r] then
      m = m + 1
      names[m], amounts[m] = r, amount
      maxes[m], mins[m], useds[m], dues[m] = MAX[r], MIN[r], USED[r], DUE[r]
    end
  end
  if m == 0 then return nil end
  for i = 1, #chain do
    local row = NODES[chain[i]]
    for j = 1, m do
      local max = row[maxes[j]]
      if max then
        max = tonumber(max)
        local used = tonumber(row[useds[j]]) or 0
        if used + amounts[j] > max then
          return table.concat({'0', 'max', path_of(chain[i]), names[j], num(used), num(amounts[j]), num(max)}, '\t')
        end
      end
    end
  end
  -- min: a node borrowing beyond its min must leave its siblings what they are owed
  for i = 1, #chain - 1 do
    local row, parent = NODES[chain[i]], NODES[chain[i + 1]]
    for j = 1, m do
      local due = parent[dues[j]]
      if due then due = tonumber(due) end
      if due and due > 0 then
        local amount = amounts[j]
        local used, min = tonumber(row[useds[j]]) or 0, tonumber(row[mins[j]]) or 0
        if used + amount > min then
          local own = owed(chain[i], names[j])
          local others = due - own
          local headroom = nil
          for k = i + 1, #chain do
            local up = NODES[chain[k]]
            local max = up[maxes[j]]
            if max then
              local left = tonumber(max) - (tonumber(up[useds[j]]) or 0) - amount
              if headroom == nil or left < headroom then headroom = left end
            end
          end
          if others > 0 and headroom ~= nil and headroom < others then
            local sibling, sused, smin, spending = owed_sibling(chain[i + 1], chain[i], names[j])
            return table.concat({'0', 'min', path_of(chain[i]), names[j], num(used), num(amount),
                                 num(min), sibling, sused, smin, spending}, '\t')
          end
        end
      end
    end
  end
  return nil
end
