-- outbox_group.lua: create a relay's consumer group on a sale's outbox,
-- reading from the stream's first entry.
--
-- KEYS[1]  sk:{sale}:stock   hash: the sale is loaded while it exists
-- KEYS[2]  sk:{sale}:outbox  stream of reservations
-- ARGV[1]  the group
--
-- Returns 1 when the group exists now (made here, or by another relay
-- first), 0 when there is nothing to read: neither the stream nor the sale
-- exists. The stream of a loaded sale is made empty if need be, so that a
-- relay can block on it before the sale's first reservation. Of a sale not
-- loaded (archived, or never preheated) nothing is made: a relay that
-- listed the sale before it was archived would otherwise leave behind a
-- stream that nobody reads or deletes. A reservation makes the stream, and
-- the next read the group, from the start.
if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local made = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
if type(made) == 'table' and made.err and not string.find(made.err, 'BUSYGROUP', 1, true) then
  return redis.error_reply(made.err)
end
return 1
