-- heal_begin.lua: stop a sale's claims while the engine rebuilds its state
-- from the database after the stock store lost writes.
--
-- KEYS[1]  sk:{sale}:stock  hash {total, reserved, limit, start_ms, end_ms, seq, healing, heals, admission}
-- ARGV[1]  total units on sale
-- ARGV[2]  per-user limit
-- ARGV[3]  window start, Unix milliseconds
-- ARGV[4]  window end (exclusive), Unix milliseconds
-- ARGV[5]  heal token (set as `healing`; heal_apply.lua checks it)
-- ARGV[6]  optional: the bucket count, for bucket 0 of a sale of several
--          (its other buckets are recreated with total 0: heal_share.lua
--          gives each its units at the end); "" for none
-- ARGV[7]  optional: the sale's admission mode when not first come, as
--          stock_write.lua stores it: a recreated lottery or queue sale
--          must not take claims its admission did not let in
--
-- Sets `healing`, which makes reserve.lua refuse every batch (try later).
-- A stock hash that vanished is recreated (reserved 0) before, so that no
-- claim can slip in between. Returns 1 when it recreated the hash, else 0.
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1],
    'total', ARGV[1], 'reserved', 0, 'limit', ARGV[2],
    'start_ms', ARGV[3], 'end_ms', ARGV[4])
  if ARGV[6] and ARGV[6] ~= '' then
    redis.call('HSET', KEYS[1], 'buckets', ARGV[6])
  end
  if ARGV[7] then
    redis.call('HSET', KEYS[1], 'admission', ARGV[7])
  end
  created = 1
end
redis.call('HSET', KEYS[1], 'healing', ARGV[5])
return created
