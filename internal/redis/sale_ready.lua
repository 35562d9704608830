-- sale_ready.lua: a library, named before the script that uses it
-- (lottery_enter.lua, queue_join.lua, queue_pace.lua): whether a sale's
-- stock hash is loaded and not healing. A lottery's entries, a waiting
-- room's places and its pace are put back from the database by a heal
-- (heal_begin.lua sets `healing`, and recreates a hash that vanished), so
-- nothing may be added to them while the hash is missing (not loaded, or
-- lost) or the sale heals: such a script answers 7, try later.
--
-- sale_ready(key) takes the key of the sale's stock hash.
local function sale_ready(key)
  local stock = redis.call('HMGET', key, 'total', 'healing')
  return stock[1] and not stock[2]
end
