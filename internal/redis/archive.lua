-- archive.lua: drop from Redis what an ended sale no longer needs. The
-- database keeps everything; this only frees memory.
--
-- KEYS[1]  sk:{sale}:stock     hash {total, reserved, limit, start_ms, end_ms, ...}
-- KEYS[2]  sk:{sale}:buyers    hash user -> units held
-- KEYS[3]  sk:{sale}:idem      hash idempotency field -> "<qty>:<reservation id>"
-- KEYS[4]  sk:{sale}:res       hash reservation id -> record
-- KEYS[5]  sk:{sale}:outbox    stream of reservations not yet relayed
-- KEYS[6]  sk:{sale}:archived  string: what the sale looked like when archived
-- KEYS[7]  sk:{sale}:moves     hash: units moving out to other buckets
-- KEYS[8]  sk:{sale}:movesin   set: moves applied here
-- KEYS[9]  sk:{sale}:entries   hash user -> a lottery's entry (lottery.go)
-- KEYS[10] sk:{sale}:won       hash user -> reservation the draw gave
-- KEYS[11] sk:{sale}:lottery   hash {closed}
-- KEYS[12…] the sale's other keys that go with it: a queue sale's waiting
--          room (queue.go)
-- (For a sale of several buckets the caller runs it on each bucket's key
-- set, bucket 0, the sale's own, last.)
-- ARGV[1]  "idem":  drop only the idempotency hash
--          "check": change nothing, answer as "all" would
--          "all":   drop every key of the sale and, unless ARGV[3] is
--                   empty, keep ARGV[3] in KEYS[6]
-- ARGV[2]  ("check", "all") reservations the database has recorded
--          (orders and failed orders); the res hash must hold no more
-- ARGV[3]  ("all") the summary to keep
-- ARGV[4]  ("check", "all") a lottery's entries the database has copied;
--          the entries hash must hold no more
-- ARGV[5]  ("check", "all") of those, the ones with a reservation; the
--          won hash must hold no more
--
-- Returns an integer:
--    1  done (for "check": "all" would be done)
--    2  nothing to do: the sale is not loaded (archived already, or never)
--    0  the sale's window has not ended by Redis TIME, the clock
--       reserve.lua decides by: nothing changed
--   -1  ("all") the outbox still holds entries: nothing changed
--   -2  ("all") the res hash holds more reservations than ARGV[2]: some
--       are not in the database yet; nothing changed
--   -3  ("all") the entries or won hash holds more than ARGV[4] or
--       ARGV[5]: a lottery's entries are not all copied to the database
--       yet; nothing changed
--
-- After the window has closed the reserve script answers "ended" before it
-- reads the idempotency hash, so dropping it changes no answer.
local end_ms = redis.call('HGET', KEYS[1], 'end_ms')
if not end_ms then
  return 2
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(end_ms) then
  return 0
end
if ARGV[1] == 'idem' then
  redis.call('DEL', KEYS[3])
  return 1
end
if redis.call('XLEN', KEYS[5]) > 0 then
  return -1
end
if redis.call('HLEN', KEYS[4]) > tonumber(ARGV[2]) then
  return -2
end
if redis.call('HLEN', KEYS[9]) > tonumber(ARGV[4]) or redis.call('HLEN', KEYS[10]) > tonumber(ARGV[5]) then
  return -3
end
if ARGV[1] == 'check' then
  return 1
end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[6], ARGV[3])
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7], KEYS[8])
for i = 9, #KEYS do
  redis.call('DEL', KEYS[i])
end
return 1
