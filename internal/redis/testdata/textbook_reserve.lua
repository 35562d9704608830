-- textbook_reserve.lua: the plain reserve script of the design's baseline
-- measurements, for benchmarks only: no window, no per-user limit, no
-- idempotency, no record, no outbox.
--
-- KEYS[1]  stock hash {total, reserved}
-- ARGV[1]  qty
--
-- Returns 1 when reserved, 0 when sold out.
local s = redis.call('HMGET', KEYS[1], 'total', 'reserved')
if tonumber(s[2]) + tonumber(ARGV[1]) > tonumber(s[1]) then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'reserved', ARGV[1])
return 1
