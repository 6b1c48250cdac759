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
--   pending   how many jobs its subtree has queued
--   due:<r>   the sum over its children of what each is owed: min - used when that is
--             positive and the child's subtree has pending jobs, else 0
-- so that the borrowing rule reads one number at the parent instead of walking siblings.
--
-- Amounts stay strings on their way to HINCRBY (Redis integers are exact int64); they
-- become Lua numbers (doubles) only to be compared, and every limit the scripts see is
-- below 2^53, where doubles are exact.

local find, sub = string.find, string.sub
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

local function num(n) return string.format('%d', n) end

local function parse_record(rec)
  local f = split(rec)
  local req = {}
  for i = 4, #f, 2 do req[#req + 1] = {f[i], f[i + 1]} end
  req[#req + 1] = {MAX_JOBS, '1'}
  return f[1], f[2], f[3], req
end

local function negate(raw)
  if string.sub(raw, 1, 1) == '-' then return string.sub(raw, 2) end
  return '-' .. raw
end

local function member_of(seq, job) return seq .. job end

-- Node fields read during this script run, written through by every change below, so a
-- batch of decisions reads the root and other shared ancestors once, not once per job.
-- (A script runs alone, so nothing else can change them meanwhile.)
local NODES = {}
local function fields_of(n, wanted)
  local c = NODES[n]
  if not c then c = {}; NODES[n] = c end
  local missing = {}
  for _, f in ipairs(wanted) do
    if c[f] == nil then missing[#missing + 1] = f end
  end
  if #missing > 0 then
    local v = redis.call('HMGET', k_node(n), unpack(missing))
    for i, f in ipairs(missing) do c[f] = v[i] end
  end
  return c
end
local function field_of(n, f) return fields_of(n, {f})[f] end
local function bump(n, f, delta)
  local v = redis.call('HINCRBY', k_node(n), f, delta)
  local c = NODES[n]
  if c then c[f] = v end
end
local function set_field(n, f, value)
  redis.call('HSET', k_node(n), f, value)
  local c = NODES[n]
  if c then c[f] = value end
end

-- The chain of node names from `leaf` up to the root, or nil and why not.
local CHAINS = {}
local function chain_of(leaf)
  local known = CHAINS[leaf]
  if known then return known end
  local chain = field_of(leaf, 'chain')
  if chain then
    CHAINS[leaf] = split(chain)
    return CHAINS[leaf]
  end
  if redis.call('HEXISTS', K_META, 'version') == 1 then
    return nil, 'quota node ' .. leaf .. ' is not in the applied ElasticQuotaTree'
  end
  if leaf == IMPLICIT_ROOT then return {IMPLICIT_ROOT} end
  return nil, 'no ElasticQuotaTree is applied: jobs go to the implicit ' .. IMPLICIT_ROOT .. ', not ' .. leaf
end

local USED = setmetatable({}, {__index = function(t, r)
  t[r] = 'used:' .. r
  return t[r]
end})

local function charge(chain, req, sign)
  for _, r in ipairs(req) do
    if r[2] ~= '0' then
      local f, delta = USED[r[1]], sign and r[2] or negate(r[2])
      for _, n in ipairs(chain) do bump(n, f, delta) end
    end
  end
end

local function count_pending(chain, delta)
  for _, n in ipairs(chain) do bump(n, 'pending', delta) end
end

-- What node `n` is owed, {resource = amount} over the resources its min names (nil when it
-- names none): min - used where positive, while its subtree has pending jobs. Computed from
-- (cached) fields, never stored: the parent's due:<r> is the only stored sum.
local MINS = {}  -- node -> {resources, fields wanted, min field names}, or false
local function owed_now(n)
  local m = MINS[n]
  if m == nil then
    local mins = field_of(n, 'mins')
    m = false
    if mins and mins ~= '' then
      m = {res = split(mins), wanted = {'pending'}, min = {}}
      for i, r in ipairs(m.res) do
        m.min[i] = 'min:' .. r
        m.wanted[2 * i], m.wanted[2 * i + 1] = m.min[i], USED[r]
      end
    end
    MINS[n] = m
  end
  if not m then return nil end
  local v = fields_of(n, m.wanted)
  local waiting = (tonumber(v['pending']) or 0) > 0
  local out = {}
  for i, r in ipairs(m.res) do
    local min, used = tonumber(v[m.min[i]]) or 0, tonumber(v[USED[r]]) or 0
    out[r] = (waiting and used < min) and (min - used) or 0
  end
  return out
end

-- Call before changing usage or pending counts along `chain`, then settle_owed after it:
-- every change in what a node is owed is folded into its parent's due:<r>.
local function owed_before(chain)
  local before = {}
  for i = 1, #chain - 1 do before[i] = owed_now(chain[i]) or false end
  return before
end
local function settle_owed(chain, before)
  for i = 1, #chain - 1 do
    if before[i] then
      for r, owed in pairs(owed_now(chain[i])) do
        local old = before[i][r]
        if owed ~= old then bump(chain[i + 1], 'due:' .. r, num(owed - old)) end
      end
    end
  end
end

-- Exact sums beyond 2^53: a high part (units of 1e9) and a low part (amounts are >= 0).
local BILLION = 1000000000
local function acc_add(acc, raw)
  local n = tonumber(raw)
  local lo = acc[2] + n % BILLION
  local carry = math.floor(lo / BILLION)
  acc[1] = acc[1] + math.floor(n / BILLION) + carry
  acc[2] = lo - carry * BILLION
end
local function acc_num(acc) return acc[1] * BILLION + acc[2] end
local function acc_str(acc)
  if acc[1] == 0 then return num(acc[2]) end
  return string.format('%d%09d', acc[1], acc[2])
end

-- The derived fields of every node as the job records say they should be.
--   names: every node; chain_fn(leaf) -> chain or nil; info_fn(name) -> parent ('' for
--   the root) and {resource = min} for the resources its min names.
-- Returns derived[node] = {field = decimal string} (zeros left out) and
-- queued[leaf] = {score, member, ...}; or nil and {kind, leaf, job} for the first job
-- whose leaf has no node.
local function derive(names, chain_fn, info_fn)
  local used, pending, queued = {}, {}, {}
  local admitted = redis.call('HGETALL', K_ADMITTED)
  for i = 1, #admitted, 2 do
    local leaf, _, _, req = parse_record(admitted[i + 1])
    local chain = chain_fn(leaf)
    if not chain then return nil, {'admitted', leaf, admitted[i]} end
    for _, n in ipairs(chain) do
      local u = used[n]
      if not u then u = {}; used[n] = u end
      for _, r in ipairs(req) do
        if r[2] ~= '0' then
          local acc = u[r[1]]
          if not acc then acc = {0, 0}; u[r[1]] = acc end
          acc_add(acc, r[2])
        end
      end
    end
  end
  local records = redis.call('HGETALL', K_PENDING)
  for i = 1, #records, 2 do
    local leaf, score, seq = parse_record(records[i + 1])
    local chain = chain_fn(leaf)
    if not chain then return nil, {'pending', leaf, records[i]} end
    for _, n in ipairs(chain) do pending[n] = (pending[n] or 0) + 1 end
    local q = queued[leaf]
    if not q then q = {}; queued[leaf] = q end
    q[#q + 1] = score
    q[#q + 1] = member_of(seq, records[i])
  end
  local derived, due = {}, {}
  for _, n in ipairs(names) do derived[n] = {}; due[n] = {} end
  for _, n in ipairs(names) do
    local d = derived[n]
    for r, acc in pairs(used[n] or {}) do d['used:' .. r] = acc_str(acc) end
    if pending[n] then d['pending'] = num(pending[n]) end
    local parent, mins = info_fn(n)
    if parent ~= '' and pending[n] then
      for r, min in pairs(mins) do
        local have = used[n] and used[n][r] and acc_num(used[n][r]) or 0
        if have < min then
          due[parent][r] = (due[parent][r] or 0) + (min - have)
        end
      end
    end
  end
  for n, sums in pairs(due) do
    for r, amount in pairs(sums) do derived[n]['due:' .. r] = num(amount) end
  end
  return derived, queued
end

-- 'max:<r>', 'min:<r>', 'used:<r>', 'due:<r>', built once per resource and script run.
local FIELD_NAMES = {}
local function field_names(r)
  local names = FIELD_NAMES[r]
  if not names then
    names = {'max:' .. r, 'min:' .. r, 'used:' .. r, 'due:' .. r}
    FIELD_NAMES[r] = names
  end
  return names
end

local function path_of(name) return field_of(name, 'path') or name end

-- The first child of `parent` other than `node` that is owed `resource`, for the reason.
local function owed_sibling(parent, node, resource)
  local used, min = 'used:' .. resource, 'min:' .. resource
  for _, s in ipairs(split(field_of(parent, 'guarded') or '')) do
    if s ~= node then
      local v = fields_of(s, {used, min, 'pending'})
      local have, want = tonumber(v[used]) or 0, tonumber(v[min]) or 0
      if (tonumber(v['pending']) or 0) > 0 and have < want then
        return path_of(s), num(have), num(want), v['pending']
      end
    end
  end
  return '?', '0', '0', '0'
end

-- The admission check over `chain` (leaf first) for `req` (which includes max-jobs 1).
-- Returns nil when the job may be admitted, else the refusal as one tab-separated reply
-- (one bulk string is far cheaper for a client to parse than an array), nodes as paths:
--   0 max node resource used requested max
--   0 min node resource used requested min sibling sibling-used sibling-min sibling-pending
-- Only `governed` resources (meta field `resources`: those some node names, tab-delimited)
-- can refuse, so only those are read, leaf first, stopping at the first node whose max
-- refuses.
local GOVERNED = nil
local function check(chain, req, governed)
  if not governed then return nil end
  if not GOVERNED then
    GOVERNED = {}
    for _, r in ipairs(split(governed)) do GOVERNED[r] = true end
  end
  local names, amounts, wanted = {}, {}, {}
  for _, r in ipairs(req) do
    local amount = tonumber(r[2])
    if amount > 0 and GOVERNED[r[1]] then
      local j = #names + 1
      names[j], amounts[j] = r[1], amount
    end
  end
  if #names == 0 then return nil end
  -- Also what owed_now will want around an admission, so that it finds it cached.
  wanted[1], wanted[2] = 'mins', 'pending'
  local f = {}
  for j, r in ipairs(names) do
    f[j] = field_names(r)
    local b = #wanted
    wanted[b + 1], wanted[b + 2], wanted[b + 3], wanted[b + 4] = f[j][1], f[j][2], f[j][3], f[j][4]
  end
  local nodes = {}
  for i, n in ipairs(chain) do
    local v = fields_of(n, wanted)
    local node = {name = n, max = {}, min = {}, used = {}, due = {}, waiting = (tonumber(v['pending']) or 0) > 0}
    for j, r in ipairs(names) do
      local max, used = tonumber(v[f[j][1]]), tonumber(v[f[j][3]]) or 0
      if max and used + amounts[j] > max then
        return table.concat({'0', 'max', path_of(n), r, num(used), num(amounts[j]), num(max)}, '\t')
      end
      node.max[j], node.min[j], node.used[j] = max, tonumber(v[f[j][2]]) or 0, used
      node.due[j] = tonumber(v[f[j][4]]) or 0
    end
    nodes[i] = node
  end
  -- min: a node borrowing beyond its min must leave its siblings what they are owed
  for i = 1, #nodes - 1 do
    local node, parent = nodes[i], nodes[i + 1]
    for j, r in ipairs(names) do
      local amount = amounts[j]
      if parent.due[j] > 0 and node.used[j] + amount > node.min[j] then
        local own = 0
        if node.waiting and node.used[j] < node.min[j] then own = node.min[j] - node.used[j] end
        local others = parent.due[j] - own
        local headroom = nil
        for k = i + 1, #nodes do
          local max = nodes[k].max[j]
          if max then
            local left = max - nodes[k].used[j] - amount
            if headroom == nil or left < headroom then headroom = left end
          end
        end
        if others > 0 and headroom ~= nil and headroom < others then
          local sibling, sused, smin, spending = owed_sibling(parent.name, node.name, r)
          return table.concat({'0', 'min', path_of(node.name), r, num(node.used[j]), num(amount),
                               num(node.min[j]), sibling, sused, smin, spending}, '\t')
        end
      end
    end
  end
  return nil
end
