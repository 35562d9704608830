-- outbox_ack.lua: acknowledge outbox entries for a consumer group and
-- delete them from the stream, in one step.
--
-- KEYS[1]  sk:{sale}:outbox  stream of reservations (reserve.lua)
-- KEYS[2]  sk:{sale}:stock   hash whose `relayed` counts the reservations
--                            deleted from the outbox (reserve.lua)
-- ARGV[1]  consumer group
-- ARGV[2…] stream ids of entries the broker has confirmed
--
-- Returns the number of entries deleted.
--
-- An entry is deleted only once the group has acknowledged it. An id the
-- group never delivered is left alone: deleting it would lose a
-- reservation no relay has published. An id already acked by another
-- relay (one that reclaimed it) was deleted by that relay's call.
--
-- The entries go by XTRIM MINID, which drops whole nodes of the stream,
-- rather than by one XDEL each, which seeks its entry inside its node (5 µs
-- of Redis per entry, the relay's largest cost there). Below the trim
-- point every entry is acknowledged: it is below the group's smallest
-- pending id, and at or below an id the group delivered, so delivered
-- (a group is handed entries in id order). Acknowledged ids at or above
-- the trim point (a batch acked while an older one is still pending) go
-- by XDEL.
--
-- Stream ids compare as (ms, seq) numbers: exact while seq stays below
-- 2^53, as every id XADD '*' makes does.
--
-- The entries are read before they go, for the reservations they hold
-- (field n; an entry written before entries held batches holds one),
-- which are added to the stock hash's `relayed` if the hash is there (a
-- sale archived meanwhile is not made again as a stub).
local group = ARGV[1]
local n = #ARGV - 1
if n == 0 then
  return 0
end
local acked = redis.call('XACK', KEYS[1], group, unpack(ARGV, 2))
if acked == 0 then
  return 0
end

local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if not ms then
    return nil
  end
  return {tonumber(ms), tonumber(seq)}
end
local function less(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end

-- The ids now acknowledged: all of them when every one was pending (the
-- usual case); otherwise those the group delivered (none is pending now).
local last
if acked < n then
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local info = {}
    for k = 1, #g, 2 do
      info[g[k]] = g[k + 1]
    end
    if info['name'] == group then
      last = parse(info['last-delivered-id'])
    end
  end
  if not last then
    return 0
  end
end
local done = {}
local top
for i = 2, #ARGV do
  local id = parse(ARGV[i])
  if id and (not last or not less(last, id)) then
    done[#done + 1] = {ARGV[i], id}
    if not top or less(top[2], id) then
      top = done[#done]
    end
  end
end
if not top then
  return 0
end

-- Trim below the highest of them, or below the smallest id still pending
-- if that is lower.
local cut = top
local pending = redis.call('XPENDING', KEYS[1], group)
if pending[1] > 0 then
  local low = parse(pending[2])
  if low and less(low, top[2]) then
    cut = {pending[2], low}
  end
end
local function reservations(entries)
  local c = 0
  for _, e in ipairs(entries) do
    local n, fields = 1, e[2]
    for k = 1, #fields, 2 do
      if fields[k] == 'n' then
        n = tonumber(fields[k + 1]) or 1
      end
    end
    c = c + n
  end
  return c
end
local gone = reservations(redis.call('XRANGE', KEYS[1], '-', '(' .. cut[1]))
local rest = {}
for _, d in ipairs(done) do
  if not less(d[2], cut[2]) then
    rest[#rest + 1] = d[1]
    gone = gone + reservations(redis.call('XRANGE', KEYS[1], d[1], d[1]))
  end
end
local deleted = redis.call('XTRIM', KEYS[1], 'MINID', cut[1])
if #rest > 0 then
  deleted = deleted + redis.call('XDEL', KEYS[1], unpack(rest))
end
if gone > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'relayed', gone)
end
return deleted
