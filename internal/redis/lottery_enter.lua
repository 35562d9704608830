-- lottery_enter.lua: record a batch of lottery entries of one sale, at
-- most one entry per buyer, in one call (the combiner's batch).
--
-- KEYS[1]  sk:{sale}:entries  hash user -> "<entry id> <qty>"
-- KEYS[2]  sk:{sale}:lottery  hash {closed}: closed is set when the draw
--                             begins; no entry is taken after it
-- KEYS[3]  sk:{sale}:stock    the sale's stock hash: no entry is taken while
--                             it is missing (not loaded, or lost) or
--                             `healing` (heal_begin.lua): the heal puts
--                             back the entries the database keeps first
-- KEYS[4…] sk:{sale}:rl:<T>:<tolerance>  KEYS[4 + k] is the rate limit of
--          every entry's check k (0-based), counted as claims' checks are,
--          in the same state (ratelimits.lua, prepended)
-- ARGV[1]  entries open, Unix milliseconds
-- ARGV[2]  entries close (exclusive), Unix milliseconds
-- ARGV[3]  R, the rate checks of every entry (#KEYS - 3, maybe 0)
-- ARGV[4…] per entry 3 + R values, in order: entry id, user id, qty, and
--          the limited key of each check
--
-- Returns 5 (entries not open yet), 6 (entries closed) or 7 (the sale is
-- not loaded or is healing: try later) for the whole batch, or one answer per entry, in order: {k, retry_after_us} when its
-- check k refused it (it is counted against none, and nothing is
-- recorded), else the string "<n> <entry id> <qty>" of the buyer's entry,
-- n = 1 when this call made it, 0 when the buyer had one (whose id and
-- qty are returned: a second entry gets the first back).
if redis.call('HEXISTS', KEYS[2], 'closed') == 1 then
  return 6
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(ARGV[1]) then
  return 5
end
if now >= tonumber(ARGV[2]) then
  return 6
end
if not sale_ready(KEYS[3]) then
  return 7
end
local per = tonumber(ARGV[3])
local stride = 3 + per
rate_open(4, per, tonumber(t[1]) * 1000000 + tonumber(t[2]), 4, stride, 3)
local users = {}
local refused = {} -- ARGV offset -> its refusal
for i = 4, #ARGV, stride do
  if per > 0 then
    local k, retry = rate_refusal(i)
    if k then
      refused[i] = {k, retry}
    end
  end
  if not refused[i] then
    users[#users + 1] = ARGV[i + 1]
  end
end
rate_save()
if #users == 0 then
  local out = {}
  for i = 4, #ARGV, stride do
    out[#out + 1] = refused[i]
  end
  return out
end
local had = redis.call('HMGET', KEYS[1], unpack(users))
local entry = {} -- user -> "<id> <qty>" as of this batch
for n = 1, #users do
  if had[n] then
    entry[users[n]] = had[n]
  end
end
local out, writes = {}, {}
for i = 4, #ARGV, stride do
  local user = ARGV[i + 1]
  local e = entry[user]
  if refused[i] then
    out[#out + 1] = refused[i]
  elseif e then
    out[#out + 1] = '0 ' .. e
  else
    e = ARGV[i] .. ' ' .. ARGV[i + 2]
    entry[user] = e
    writes[#writes + 1] = user
    writes[#writes + 1] = e
    out[#out + 1] = '1 ' .. e
  end
end
if #writes > 0 then
  redis.call('HSET', KEYS[1], unpack(writes))
end
return out
