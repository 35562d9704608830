-- reserve_plain.lua: the plain reserve script, one call per request: no
-- window, no per-user limit, no idempotency, no record, no outbox. It is
-- the textbook way to deduct stock in Redis, and the baseline the HTTP
-- "textbook" benchmark serves.
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
