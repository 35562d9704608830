-- queue_pace.lua: move an adaptive queue sale's admission on to now and
-- set the rate it goes on at. Every node adapts the rate to its own
-- latency and calls this; each call counts the time since the last one at
-- the rate the last caller set, so the nodes together admit at a mix of
-- their rates, never at their sum.
--
-- KEYS[1]  sk:{sale}:queue_pace  hash {admitted, at, rate}: positions
--                                admitted by at (Unix ms, Redis TIME),
--                                moving at rate a second since
-- KEYS[2]  sk:{sale}:stock       the sale's stock hash: the pace is not
--                                moved while it is missing (lost) or
--                                `healing`: the heal puts the pace the
--                                database keeps back first
-- ARGV[1]  the sale's start, Unix milliseconds: position 1 is admitted
--          then, and until the first call the sale's starting rate holds
-- ARGV[2]  the starting rate (admit_per_second)
-- ARGV[3]  the rate from now on
--
-- Returns {admitted, at, rate} as strings; before the start {"0", start,
-- starting rate}, changing nothing; 7 (try later) while the sale is not
-- loaded or heals, changing nothing.
if not sale_ready(KEYS[2]) then
  return 7
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = tonumber(ARGV[1])
if now < start then
  return {'0', ARGV[1], ARGV[2]}
end
local h = redis.call('HMGET', KEYS[1], 'admitted', 'at', 'rate')
local admitted, at, rate = 1, start, tonumber(ARGV[2])
if h[1] then
  admitted, at, rate = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
end
if now > at then
  admitted = admitted + rate * (now - at) / 1000
  at = now
end
local a = string.format('%.6f', admitted)
redis.call('HSET', KEYS[1], 'admitted', a, 'at', string.format('%d', at), 'rate', ARGV[3])
return {a, string.format('%d', at), ARGV[3]}
