-- queue_join.lua: give a batch of buyers places in one queue sale's
-- waiting room, one place per buyer, at most a cap of places per address.
--
-- KEYS[1]  sk:{sale}:queue     sorted set user -> score: a buyer who
--                              joined before the start has a random score
--                              below 2^40 (a random order among the early
--                              ones), a later one 2^40 + their arrival
--                              number (first come, behind them)
-- KEYS[2]  sk:{sale}:queue_ip  hash address -> places taken from it
-- KEYS[3]  sk:{sale}:queue_seq counter of arrivals after the start
-- KEYS[4]  sk:{sale}:stock     the sale's stock hash: no place is given
--                              while it is missing (not loaded, or lost)
--                              or `healing` (heal_begin.lua): the heal puts
--                              back the places the database keeps first
-- KEYS[5…] sk:{sale}:rl:<T>:<tolerance>  KEYS[5 + k] is the rate limit of
--          every join's check k (0-based), counted as claims' checks are,
--          in the same state (ratelimits.lua, prepended)
-- ARGV[1]  the sale's start, Unix milliseconds
-- ARGV[2]  places an address may hold (0: no cap)
-- ARGV[3]  R, the rate checks of every join (#KEYS - 4, maybe 0)
-- ARGV[4…] per buyer 3 + R values: user id, address ("" unknown), a
--          random integer in [0, 2^40), and the limited key of each check
--
-- Returns 7 (the sale is not loaded or heals: try later) for the whole
-- batch, or one answer per buyer, in order: {k, retry_after_us} when its
-- check k refused the join (counted against none; no place is given or
-- looked up), -1 when their address holds the cap already, else the
-- string "<position> <score>": their 1-based position now and their
-- place's score (given now or before).
if not sale_ready(KEYS[4]) then
  return 7
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local early = now < tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local per = tonumber(ARGV[3])
local stride = 3 + per
rate_open(5, per, tonumber(t[1]) * 1000000 + tonumber(t[2]), 4, stride, 3)
local out = {}
for i = 4, #ARGV, stride do
  local user, ip = ARGV[i], ARGV[i + 1]
  local k, retry
  if per > 0 then
    k, retry = rate_refusal(i)
  end
  local rank
  if not k then
    rank = redis.call('ZRANK', KEYS[1], user)
  end
  if k then
    out[#out + 1] = {k, retry}
  elseif rank then
    out[#out + 1] = (rank + 1) .. ' ' .. redis.call('ZSCORE', KEYS[1], user)
  elseif cap > 0 and ip ~= '' and tonumber(redis.call('HGET', KEYS[2], ip) or '0') >= cap then
    out[#out + 1] = -1
  else
    local score
    if early then
      score = ARGV[i + 2]
    else
      score = string.format('%d', 1099511627776 + redis.call('INCR', KEYS[3]))
    end
    redis.call('ZADD', KEYS[1], score, user)
    if ip ~= '' then
      redis.call('HINCRBY', KEYS[2], ip, 1)
    end
    out[#out + 1] = (redis.call('ZRANK', KEYS[1], user) + 1) .. ' ' .. score
  end
end
rate_save()
return out
