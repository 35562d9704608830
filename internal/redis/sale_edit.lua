-- sale_edit.lua: give a sale that has not started its edited stock,
-- per-user limit and window, loading it if it is not loaded yet.
--
-- KEYS[1]  sk:{sale}:stock  hash {total, reserved, limit, start_ms, end_ms}
-- ARGV[1]  total units on sale
-- ARGV[2]  per-user limit
-- ARGV[3]  window start, Unix milliseconds
-- ARGV[4]  window end (exclusive), Unix milliseconds
-- ARGV[5]  optional: the sale's number of stock buckets (bucket 0 only;
--          see buckets.go), stored as `buckets`
-- (written by stock_write.lua, which this script begins with)
--
-- A sale of several buckets runs this on each bucket with its share,
-- bucket 0 last (as preheat does).
--
-- Returns 1 when the hash now holds the edit, 0 when it was refused: the
-- loaded sale has opened (by Redis TIME) or has reservations, which an
-- edit must never reset. Loading a sale that is not loaded yet is what
-- keeps a preheat that read the row before the edit from loading the old
-- values afterwards (preheat.lua never touches an existing hash).
local cur = redis.call('HMGET', KEYS[1], 'reserved', 'start_ms')
if cur[1] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(cur[1]) ~= 0 or now >= tonumber(cur[2]) then
    return 0
  end
end
stock_write(KEYS[1])
return 1
