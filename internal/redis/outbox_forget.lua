-- outbox_forget.lua: may a sale leave the registry of outboxes?
--
-- KEYS[1]  sk:{sale}:stock   hash {total, reserved, limit, start_ms, end_ms}
-- KEYS[2]  sk:{sale}:outbox  stream of reservations
-- ARGV[1]  grace after the end of the window, milliseconds
--
-- Returns 1 when the outbox is empty and the sale can take no more
-- reservations (not loaded, or its window ended over ARGV[1] ms ago by this
-- node's clock, the clock reserve.lua decides by), else 0.
--
-- The registry key lives in another slot, so the caller removes the sale
-- from it and then asks again: a sale loaded or reserved in between is
-- registered again (see Store.ForgetOutbox).
if redis.call('XLEN', KEYS[2]) > 0 then
  return 0
end
local end_ms = redis.call('HGET', KEYS[1], 'end_ms')
if not end_ms then
  -- Not loaded (or archived): an empty stream left behind (made with a
  -- relay's group while the sale was loaded) goes too. A reservation
  -- would make it again, and a relay's read its group, from the start.
  redis.call('DEL', KEYS[2])
  return 1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(end_ms) + tonumber(ARGV[1]) then
  return 0
end
return 1
