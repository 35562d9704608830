-- move_in.lua: add a journalled move's units to the receiving bucket, the
-- second of a rebalance's two steps (see buckets.go). Idempotent: a move id
-- is applied once, however often this runs (a repair after a lost reply).
--
-- KEYS[1]  sk:{bucket}:stock    hash {total, reserved, ..., moved_in}
-- KEYS[2]  sk:{bucket}:movesin  set of the move ids applied here
-- ARGV[1]  move id
-- ARGV[2]  n, the units the move took out of its donor
--
-- Returns 1 when this call added the units, 0 when the move was applied
-- before, -1 when the bucket is not loaded (nothing changes: the journal
-- keeps the move for a later try).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'total', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'moved_in', ARGV[2])
return 1
