-- stock_write.lua: write a sale's stock hash from the ARGV that
-- preheat.lua and sale_edit.lua take (both begin with this file), so the
-- hash has one layout:
--
-- ARGV[1]  total units on sale
-- ARGV[2]  per-user limit
-- ARGV[3]  window start, Unix milliseconds
-- ARGV[4]  window end (exclusive), Unix milliseconds
-- ARGV[5]  optional: the sale's number of stock buckets (bucket 0 only;
--          see buckets.go), stored as `buckets`; "" for none
-- ARGV[6]  optional: the sale's admission mode when not first come
--          ("lottery", "queue"), stored as `admission`; "" for none

-- stock_write sets the stock hash key to those values, none reserved.
local function stock_write(key)
  redis.call('HSET', key,
    'total', ARGV[1], 'reserved', 0, 'limit', ARGV[2],
    'start_ms', ARGV[3], 'end_ms', ARGV[4])
  if ARGV[5] and ARGV[5] ~= '' then
    redis.call('HSET', key, 'buckets', ARGV[5])
  end
  if ARGV[6] and ARGV[6] ~= '' then
    redis.call('HSET', key, 'admission', ARGV[6])
  end
end

