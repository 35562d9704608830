-- preheat.lua: load one sale's stock, per-user limit and window, once.
--
-- KEYS[1]  sk:{sale}:stock  hash {total, reserved, limit, start_ms, end_ms}
-- ARGV[1]  total units on sale
-- ARGV[2]  per-user limit
-- ARGV[3]  window start, Unix milliseconds
-- ARGV[4]  window end (exclusive), Unix milliseconds
-- ARGV[5]  optional: the sale's number of stock buckets (bucket 0 only;
--          see buckets.go), stored as `buckets`
-- (written by stock_write.lua, which this script begins with)
-- ARGV[7]  optional: a heal token to load the hash with as `healing`, so
--          that it refuses claims until a heal takes it over (Loader)
--
-- Returns 1 when this call loaded the sale, 0 when it was already loaded.
-- An existing stock hash is never touched: a second preheat of a live sale
-- (an operator's retry, two nodes preheating at once) must not reset
-- `reserved` and sell the same units twice.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
stock_write(KEYS[1])
if ARGV[7] and ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'healing', ARGV[7])
end
return 1
