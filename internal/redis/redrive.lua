-- redrive.lua: take the units of a re-driven failed order (an operator
-- turned a claim the database refused into an order) in the stock store,
-- unless it counts them already, so that `reserved` keeps up with what
-- the database sold and the heal watcher sees no loss.
--
-- KEYS[1]  sk:{sale}:stock   hash {total, reserved, …} (reserve.lua)
-- KEYS[2]  sk:{sale}:buyers  hash user -> units held
-- KEYS[3]  sk:{sale}:res     hash of reservation records (record.lua)
-- ARGV[1]  the reservation id
-- ARGV[2]  its buyer
-- ARGV[3]  its qty (integer >= 1)
-- ARGV[4]  the time to record, in ms
--
-- Returns
--    1  taken now: `reserved` and the buyer's units went up by qty and the
--       reservation's record reads active
--    0  counted already: its record is active (the claim Redis granted
--       still holds its units); nothing changed
--   -1  the sale is not in the stock store (or is spread over buckets,
--       whose keys are its buckets'); nothing changed
--   -2  taking qty would put `reserved` past `total`: Redis counts claims
--       the database has not seen; nothing changed (the heal settles it)
-- Calling it again after 1 answers 0: it may be retried.

local field, rec = record_get(KEYS[3], ARGV[1])
if field then
  local status = record_parse(rec)
  if status == 'active' then
    return 0
  end
end
local stock = redis.call('HMGET', KEYS[1], 'total', 'reserved', 'buckets')
-- A buyer of a bucketed sale is counted in their home bucket, which this
-- script does not know; the heal watcher leaves such sales alone.
if not stock[1] or tonumber(stock[3] or '1') > 1 then
  return -1
end
local qty = tonumber(ARGV[3])
if tonumber(stock[2] or '0') + qty > tonumber(stock[1]) then
  return -2
end
redis.call('HINCRBY', KEYS[1], 'reserved', qty)
redis.call('HINCRBY', KEYS[2], ARGV[2], qty)
-- The record as reserve.lua writes one whose time is not the id's.
local short = string.match(ARGV[1], '%.([^.]*)$') or ARGV[1]
redis.call('HSET', KEYS[3], short, ARGV[3] .. '@' .. ARGV[4] .. ':' .. ARGV[2])
if field and field ~= short then
  redis.call('HDEL', KEYS[3], field)
end
return 1
