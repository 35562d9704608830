-- heal_abort.lua: give up a heal that did not finish, letting claims in
-- again, unless another heal has taken over the sale since.
--
-- KEYS[1]  sk:{sale}:stock  hash (see reserve.lua)
-- ARGV[1]  the heal's token (heal_begin.lua set `healing` to it)
--
-- Returns 1 when it cleared `healing`, 0 when the flag held another token
-- or none.
if redis.call('HGET', KEYS[1], 'healing') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'healing')
end
return 0
