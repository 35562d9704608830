-- reserve.lua: decide a batch of reservation requests for one sale,
-- atomically and in order, and record every reservation in the same step.
--
-- KEYS[1]  sk:{sale}:stock   hash {total, reserved, limit, start_ms, end_ms,
--                            seq, healing, heals}: seq counts the batches
--                            that reserved (a sequence that goes backwards
--                            is a stock store that lost writes); healing is
--                            set while the engine rebuilds the sale from
--                            the database (heal.lua)
-- KEYS[2]  sk:{sale}:buyers  hash user -> units held (never expires while
--                            the sale lives: an expiring claimed-set lets
--                            duplicate buyers through)
-- KEYS[3]  sk:{sale}:idem    hash "<#user>:<user><key>" -> "<qty>:<id>", where <id>
--                            is the reservation id without its "<sale>." (the
--                            key names the sale; 16 bytes less per keyed
--                            reservation); entries written before hold the
--                            whole id, which is read as it is
-- KEYS[4]  sk:{sale}:res     hash of reservation records: the id's last 26
--                            characters -> "<qty>:<user>" when the id's own
--                            time is within 2 s of Redis TIME, else
--                            "<qty>@<reserved_at_ms>:<user>" (record.lua
--                            has the whole format)
-- KEYS[5]  sk:{sale}:outbox  stream, one entry per reservation with fields
--                            reservation_id, user_id, qty, reserved_at_ms
-- KEYS[6…] sk:{sale}:rl:<key>:<T>:<tolerance>  rate-limit keys, the same
--          number R for every request (R = (#KEYS - 5) / requests, maybe 0):
--          request j's are KEYS[5 + (j-1)*R + 1 … 5 + j*R]; each holds a GCRA
--          theoretical arrival time (see ratelimit.lua, whose algorithm this
--          is), T and tolerance in microseconds are the end of its name
-- ARGV     4 per request, flat and in order:
--          reservation id, user id, qty (integer >= 1), idempotency key ("" = none)
--
-- Returns either
--   an integer outcome code that answers every request of the batch (the sale
--   is not preheated, or the window is not open), or
--   an array with one element per request, in order: an integer outcome code,
--   or, for an idempotent replay, the id (bulk string) of the earlier
--   reservation; the replayed qty is the request's qty, since only an equal
--   qty replays; or, for a request refused by a rate limit,
--   {8, index of the refusing key among the request's (0-based), retry_after_us}.
-- Outcome codes: 1 reserved, 3 sold out, 4 limit exceeded, 5 not started
-- (or not preheated), 6 ended, 7 idempotency key reused with another qty,
-- 9 (for the whole batch) the sale is healing: try later.
--
-- Only reservations are stored under an idempotency key. A rejection is
-- re-evaluated when its key comes back: that costs nothing to store, and a
-- retry after stock was restored, or after the buyer freed their limit, may
-- now legitimately succeed.
--
-- The stock hash and TIME are read once per batch, `reserved` and the res
-- hash are written once per batch; per request the script reads the buyer's
-- fields and, for a reservation, writes them and one outbox entry.

local stock = redis.call('HMGET', KEYS[1], 'total', 'reserved', 'limit', 'start_ms', 'end_ms', 'healing')
if not stock[1] then
  return 5
end
if stock[6] then
  return 9
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(stock[4]) then
  return 5
end
if now >= tonumber(stock[5]) then
  return 6
end
-- Built from strings so that no number formatting can turn it into 1.7e+12.
local now_ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))

local total = tonumber(stock[1])
local reserved = tonumber(stock[2])
local limit = tonumber(stock[3])
local before = reserved

-- Rate limits, checked before anything else of a request: a refused
-- request counts against none of its keys, an allowed one against all.
local per = (#KEYS - 5) / (#ARGV / 4)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tats = {} -- rate key -> its TAT after this batch's requests
local function rate_refusal(j)
  local base = 5 + (j - 1) * per
  local next_tat = {}
  for k = 1, per do
    local key = KEYS[base + k]
    local ts, tols = string.match(key, ':(%d+):(%d+)$')
    local tat = tats[key] or tonumber(redis.call('GET', key) or 0)
    if tat < now_us then
      tat = now_us
    end
    local new_tat = tat + tonumber(ts)
    local allow_at = new_tat - tonumber(tols)
    if allow_at > now_us then
      return {8, k - 1, allow_at - now_us}
    end
    next_tat[k] = new_tat
  end
  for k = 1, per do
    tats[KEYS[base + k]] = next_tat[k]
  end
  return nil
end

-- Decide every request first, reading Redis only. What earlier requests of
-- this batch changed is kept in these tables until the writes below.
local held = {}    -- user -> units held so far
local claimed = {} -- idempotency field -> "<qty>:<reservation id>"
local won = {}     -- ARGV offsets of the requests that reserved, in order
local out = {}
for i = 1, #ARGV, 4 do
  local id, user, qtys, key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local qty = tonumber(qtys)
  local answer
  if per > 0 then
    answer = rate_refusal((i + 3) / 4)
  end
  local field
  if not answer and key ~= '' then
    field = #user .. ':' .. user .. key
    local prev = claimed[field] or redis.call('HGET', KEYS[3], field)
    if prev then
      local sep = string.find(prev, ':', 1, true)
      if tonumber(string.sub(prev, 1, sep - 1)) == qty then
        answer = string.sub(prev, sep + 1)
        if not string.find(answer, '.', 1, true) then
          -- The request's own id carries the same "<sale>.".
          answer = string.match(id, '^[^.]*%.') .. answer
        end
      else
        answer = 7
      end
    end
  end
  if not answer then
    local h = held[user] or tonumber(redis.call('HGET', KEYS[2], user) or '0')
    if h + qty > limit then
      answer = 4
    elseif reserved + qty > total then
      answer = 3
    else
      reserved = reserved + qty
      held[user] = h + qty
      if field then
        claimed[field] = qtys .. ':' .. id
      end
      won[#won + 1] = i
      answer = 1
    end
  end
  out[#out + 1] = answer
end
for key, tat in pairs(tats) do
  redis.call('SET', key, string.format('%.0f', tat), 'PX', math.ceil((tat - now_us) / 1000))
end
if #won == 0 then
  return out
end

-- Then write, `reserved` first. A write here fails only on a key of the
-- wrong type; should one ever fail, Redis has then counted units it never
-- handed out (an undersell), never handed out units it does not count.
redis.call('HINCRBY', KEYS[1], 'reserved', reserved - before)
redis.call('HINCRBY', KEYS[1], 'seq', 1)
-- The millisecond time in the first 48 bits of a reservation id's last
-- 26 (base32) characters, or nil: a record whose id carries its time
-- (near enough) need not store it.
local b32 = {}
for k = 1, 32 do
  b32[string.byte('0123456789ABCDEFGHJKMNPQRSTVWXYZ', k)] = k - 1
end
local function id_ms(short)
  if not short or #short ~= 26 then
    return nil
  end
  local v = 0
  for k = 1, 10 do
    local d = b32[string.byte(short, k)]
    if not d then
      return nil
    end
    v = v * 32 + d
  end
  return math.floor(v / 4)
end

local records = {} -- field, value pairs for one HSET of the res hash
for _, i in ipairs(won) do
  local id, user, qtys, key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local short = string.match(id, '%.([^.]*)$')
  redis.call('HINCRBY', KEYS[2], user, qtys)
  if key ~= '' then
    redis.call('HSET', KEYS[3], #user .. ':' .. user .. key, qtys .. ':' .. short)
  end
  local ms = id_ms(short)
  records[#records + 1] = short or id
  if ms and math.abs(now - ms) <= 2000 then
    records[#records + 1] = qtys .. ':' .. user
  else
    records[#records + 1] = qtys .. '@' .. now_ms .. ':' .. user
  end
end
redis.call('HSET', KEYS[4], unpack(records))
for _, i in ipairs(won) do
  redis.call('XADD', KEYS[5], '*', 'reservation_id', ARGV[i], 'user_id', ARGV[i + 1],
    'qty', ARGV[i + 2], 'reserved_at_ms', now_ms)
end
return out
