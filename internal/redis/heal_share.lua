-- heal_share.lua: give one bucket of a healed sale its unreserved units,
-- the last step before a heal of a sale of several buckets lets claims in.
--
-- KEYS[1]  sk:{bucket}:stock  hash {total, reserved, ..., healing}
-- KEYS[2]  sk:{bucket}:moves  the bucket's move journal (see buckets.go)
-- ARGV[1]  heal token that heal_begin.lua set
-- ARGV[2]  share: the unreserved units the bucket gets (seckill.HealShares)
--
-- Sets total = reserved + share and deletes the journal: the shares were
-- computed from the sale's stock, so a journalled move's units are in
-- them already. Returns 1, or -1 when `healing` no longer holds the token
-- (another heal took over; nothing changed).
if redis.call('HGET', KEYS[1], 'healing') ~= ARGV[1] then
  return -1
end
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or '0')
redis.call('HSET', KEYS[1], 'total', reserved + tonumber(ARGV[2]))
redis.call('DEL', KEYS[2])
return 1
