-- queue_seq_raise.lua: raise a waiting room's arrival counter to at least
-- ARGV[1] (a heal's RestoreRoom: arrivals after the start get numbers
-- past every place it put back).
--
-- KEYS[1]  sk:{sale}:queue_seq
-- ARGV[1]  the lowest value it may hold
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
