-- restore.lua: give active reservations' units back to their sale's stock
-- and to their buyers' limits, and mark them restored, in one step.
--
-- KEYS[1]  sk:{sale}:stock   hash {total, reserved, limit, start_ms, end_ms}
-- KEYS[2]  sk:{sale}:buyers  hash user -> units held
-- KEYS[3]  sk:{sale}:res     hash of reservation records (record.lua)
-- ARGV     reservation ids of the sale, one or more (a batch of the
--          payment-timeout sweeper), handled in order
--
-- Returns an array with one integer per reservation id, in order:
--    1  restored now: `reserved` and the buyer's units went down by qty
--       and `restored` went up by it (the
--       buyer's field is deleted at 0) and the record reads restored
--    0  restored already (by an earlier call or an earlier id of this
--       one); nothing changed
--   -1  no record of the reservation; nothing changed
--   -2  the record is malformed or has an unknown status; nothing changed
--   -3  the sale's stock hash is gone or its `reserved` is below qty;
--       nothing changed
--   -4  the buyer holds fewer units than qty; nothing changed
-- -2 to -4 mean the keys disagree with each other, which no script of this
-- store can bring about: the caller reports them, and the units stay
-- unsold (an undersell) rather than go back into a stock that may be
-- wrong (a possible oversell). One such id does not stop the others.
--
-- The idempotency entry (sk:{sale}:idem) that may point at a reservation
-- is left alone on purpose: the buyer's retry of the old request keeps
-- getting the old, now restored, reservation back, never a fresh unit. A
-- new claim takes a new key.
--
-- For each id every check comes before its first write, so a refusal
-- changes nothing. `reserved` is read once and written once per call,
-- last: should a write before it ever fail (only a key of the wrong type
-- can), units are marked restored but not back in stock (an undersell),
-- never back in stock twice.

local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or '')
local before = reserved
local out = {}

local function restore(id)
  local field, rec = record_get(KEYS[3], id)
  if not field then
    return -1
  end
  local status, qtys, user, restored = record_parse(rec)
  if status == 'restored' then
    return 0
  end
  if status ~= 'active' then
    return -2
  end
  local qty = tonumber(qtys)
  if qty < 1 then
    return -2
  end
  if not reserved or reserved < qty then
    return -3
  end
  local held = tonumber(redis.call('HGET', KEYS[2], user) or '')
  if not held or held < qty then
    return -4
  end

  reserved = reserved - qty
  if held == qty then
    redis.call('HDEL', KEYS[2], user)
  else
    redis.call('HINCRBY', KEYS[2], user, -qty)
  end
  -- Written now, not with the others, so that the same id later in
  -- this call reads it restored.
  redis.call('HSET', KEYS[3], field, restored)
  return 1
end

for i = 1, #ARGV do
  out[i] = restore(ARGV[i])
end
if reserved and reserved ~= before then
  redis.call('HINCRBY', KEYS[1], 'reserved', reserved - before)
  -- The running count of units given back, for the reconciliation
  -- gauges: with `reserved` it says what was ever claimed, without a scan.
  redis.call('HINCRBY', KEYS[1], 'restored', before - reserved)
end
return out
