-- queue_pace_restore.lua: put back an adaptive queue sale's pace that the
-- stock store lost, as the database keeps it (a heal's, while the sale
-- refuses joins and the pace is not moved): a pace still there is left.
--
-- KEYS[1]  sk:{sale}:queue_pace  hash {admitted, at, rate} (queue_pace.lua)
-- ARGV[1]  admitted, ARGV[2] at (Unix ms), ARGV[3] rate
--
-- Returns 1 when it put the pace back, 0 when one was there.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'admitted', ARGV[1], 'at', ARGV[2], 'rate', ARGV[3])
return 1
