-- ratelimit.lua: count one request against a rate limit with GCRA (the
-- generic cell rate algorithm, as go-redis/redis_rate does), on the Redis
-- clock, so every API node shares one count per key.
--
-- KEYS[1]  sk:rl:{<key>}:<T>:<tolerance>  string (one key per limit, so
--                         nodes that disagree on the limit never share one): the theoretical arrival time (TAT) of
--                         the next request, Unix microseconds; expires when
--                         it is reached (the key is then back to a full burst)
-- ARGV[1]  emission interval T: microseconds one request uses up
--          (period / rate), integer >= 1
-- ARGV[2]  burst tolerance: rate * T, microseconds; a fresh key allows
--          exactly `rate` requests at once, then one every T
--
-- Returns {allowed, remaining, retry_after_us}:
--   allowed         1 when the request was counted, 0 when refused
--   remaining       requests that would be allowed right now after this one
--   retry_after_us  for a refused request, microseconds until one request
--                   would be allowed; 0 when allowed
--
-- A refused request changes nothing, so a caller may answer later requests
-- of the same key locally until retry_after_us has passed: Redis would
-- refuse them too.
--
-- Times are whole microseconds (about 1.8e15 now, exact in a Lua number);
-- the TAT is written with %.0f because tostring would round it to 14
-- digits.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])

local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
if tat < now then
  tat = now
end
local new_tat = tat + interval
local allow_at = new_tat - tolerance
if allow_at > now then
  return {0, 0, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return {1, math.floor((now - allow_at) / interval), 0}
