-- heal_apply.lua: rebuild what a stock store that lost writes forgot of a
-- sale, from the database, and let claims in again.
--
-- KEYS[1]  sk:{sale}:stock   hash {total, reserved, ..., healing, heals}
-- KEYS[2]  sk:{sale}:buyers  hash user -> units held
-- KEYS[3]  sk:{sale}:res     hash of reservation records (record.lua)
-- KEYS[4]  sk:{sale}:idem    hash of idempotency entries (reserve.lua)
-- ARGV[1]  heal token that heal_begin.lua set
-- ARGV[2]  "1": the last page of the heal (count it, let claims in);
--          "0": one page of a large heal (the sale stays healing)
-- ARGV[3]  n: the number of records to add
-- then n × 6: reservation id, user, qty, reserved_at_ms, idempotency field
--          ("" = none), "1" when restored (else "") — orders the database
--          holds and the stock store has no record of: each is added as
--          active, with its units counted in `reserved` and the buyer's
--          units, or, when restored (a cancelled order, whose units went
--          back), as restored, counting nothing (a record that exists is
--          left alone); and, when the order was made under an
--          Idempotency-Key, an idempotency entry under the field of the
--          key's digest (replay.go digestField, read by reserve.lua): the
--          entry of the key itself went with the record, and the database
--          keeps only the digest
-- then m × 3 to the end: reservation id, user, qty — active records whose
--          claim the database refused (it lacked the stock, the buyer was
--          over the limit, or the claim was recorded lost): each is marked
--          restored and its units leave `reserved` and the buyer
--
-- Then, on the last page, `heals` is incremented and `healing` cleared. Returns {added,
-- released}, or -1 when `healing` no longer holds the token (another heal
-- took over; nothing changed).
if redis.call('HGET', KEYS[1], 'healing') ~= ARGV[1] then
  return -1
end
local n = tonumber(ARGV[3])
local added, released = 0, 0
local i = 4
for _ = 1, n do
  local id, user, qtys, at, field, restored = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5] == '1'
  local short = string.match(id, '%.([^.]*)$') or id
  local rec = qtys .. '@' .. at .. ':' .. user
  if restored then
    rec = '-' .. rec -- record.lua's restored form
  end
  if redis.call('HEXISTS', KEYS[3], id) == 0 and redis.call('HSETNX', KEYS[3], short, rec) == 1 then
    if not restored then
      redis.call('HINCRBY', KEYS[1], 'reserved', qtys)
      redis.call('HINCRBY', KEYS[2], user, qtys)
      added = added + 1
    end
    if field ~= '' then
      redis.call('HSETNX', KEYS[4], field, qtys .. ':' .. short)
    end
  end
  i = i + 6
end
while i <= #ARGV do
  local id, user, qtys = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local field, rec = record_get(KEYS[3], id)
  if field then
    local status, q, u, restored = record_parse(rec)
    if status == 'active' then
      local qty = tonumber(q)
      redis.call('HINCRBY', KEYS[1], 'reserved', -qty)
      redis.call('HINCRBY', KEYS[1], 'restored', qty) -- the counter restore.lua keeps
      local held = tonumber(redis.call('HGET', KEYS[2], u) or '0')
      if held <= qty then
        redis.call('HDEL', KEYS[2], u)
      else
        redis.call('HINCRBY', KEYS[2], u, -qty)
      end
      redis.call('HSET', KEYS[3], field, restored)
      released = released + 1
    end
  end
  i = i + 3
end
if ARGV[2] == '1' then
  redis.call('HINCRBY', KEYS[1], 'heals', 1)
  redis.call('HDEL', KEYS[1], 'healing')
end
return {added, released}
