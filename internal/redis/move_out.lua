-- move_out.lua: take up to n unreserved units out of one stock bucket and
-- journal the move, the first of a rebalance's two steps (see buckets.go).
--
-- KEYS[1]  sk:{bucket}:stock  hash {total, reserved, ..., moved_out}
-- KEYS[2]  sk:{bucket}:moves  hash move id -> "<receiver bucket>:<n>:<unix s>"
-- ARGV[1]  move id (unique)
-- ARGV[2]  n, the most units to move (integer >= 1)
-- ARGV[3]  the receiving bucket's index
--
-- Returns the units moved: min(n, total - reserved), 0 when none are
-- unreserved, the bucket is not loaded or it is healing (heal_share.lua
-- sets its total and forgets its journal). total never goes below reserved,
-- so no unit that is held by a reservation can leave.
local st = redis.call('HMGET', KEYS[1], 'total', 'reserved', 'healing')
if not st[1] or st[3] then
  return 0
end
local n = math.min(tonumber(ARGV[2]), tonumber(st[1]) - tonumber(st[2]))
if n <= 0 then
  return 0
end
local t = redis.call('TIME')
redis.call('HINCRBY', KEYS[1], 'total', -n)
redis.call('HINCRBY', KEYS[1], 'moved_out', n)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. ':' .. n .. ':' .. t[1])
return n
