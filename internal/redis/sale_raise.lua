-- sale_raise.lua: raise a loaded sale's stock to what the database now
-- puts on sale (after an operator added units).
--
-- KEYS[1]  sk:{sale}:stock  hash {total, reserved, limit, start_ms, end_ms}
-- ARGV[1]  total units on sale, as the database now has it
--
-- Returns 1 when total was raised, 0 when it was at least ARGV[1] already,
-- -1 when the sale is not loaded (preheat will load the database's stock).
-- Setting the database's figure rather than adding keeps it idempotent:
-- a retry, or two additions whose calls arrive out of order, end at the
-- same total, and total never goes above the database's. A sale of
-- several buckets takes added units in bucket 0 through move_in.lua
-- instead, keyed by the new total (see RaiseStock).
local total = redis.call('HGET', KEYS[1], 'total')
if not total then
  return -1
end
if tonumber(total) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'total', ARGV[1])
return 1
