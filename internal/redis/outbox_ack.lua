-- outbox_ack.lua: acknowledge outbox entries for a consumer group and
-- delete them from the stream, in one step.
--
-- KEYS[1]  sk:{sale}:outbox  stream of reservations
-- ARGV[1]  consumer group
-- ARGV[2…] stream ids of entries the broker has confirmed
--
-- Returns the number of entries deleted.
--
-- An entry is deleted only when this XACK removed it from the group's
-- pending list. An id the group never delivered (not pending) is left
-- alone: deleting it would lose a reservation no relay has published. An
-- id already acked by another relay (one that reclaimed it) was deleted by
-- that relay's call.
local deleted = 0
for i = 2, #ARGV do
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    deleted = deleted + redis.call('XDEL', KEYS[1], ARGV[i])
  end
end
return deleted
