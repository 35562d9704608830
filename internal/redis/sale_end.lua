-- sale_end.lua: end a loaded sale now, by Redis TIME, the clock the
-- reserve script checks: the next batch on any node answers "ended".
--
-- KEYS[1]  sk:{sale}:stock  hash {total, reserved, limit, start_ms, end_ms}
--
-- A sale of several buckets runs this on every bucket (each has its own
-- window, see buckets.go).
--
-- Returns 1 when this call ended it, 0 when it had ended already, -1 when
-- the sale is not loaded (nothing to do: preheat loads the database's
-- window, which has ended too). A window that had not opened is closed
-- before it opens (start_ms = now - 1), so buyers hear "ended", not "not
-- started".
local cur = redis.call('HMGET', KEYS[1], 'start_ms', 'end_ms')
if not cur[1] then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(cur[2]) <= now then
  return 0
end
if tonumber(cur[1]) >= now then
  redis.call('HSET', KEYS[1], 'start_ms', now - 1)
end
redis.call('HSET', KEYS[1], 'end_ms', now)
return 1
