-- reserve.lua: decide a batch of reservation requests for one sale,
-- atomically and in order, and record every reservation in the same step.
--
-- KEYS[1]  sk:{sale}:stock   hash {total, reserved, limit, start_ms, end_ms,
--                            seq, healing, heals, outboxed, relayed,
--                            admission}: seq
--                            counts the batches that reserved (a sequence
--                            that goes backwards is a stock store that lost
--                            writes); healing is set while the engine
--                            rebuilds the sale from the database
--                            (heal.lua); outboxed counts the reservations
--                            ever appended to the outbox, relayed
--                            (outbox_ack.lua) those deleted from it
-- KEYS[2]  sk:{sale}:buyers  hash user -> units held (never expires while
--                            the sale lives: an expiring claimed-set lets
--                            duplicate buyers through)
-- KEYS[3]  sk:{sale}:idem    hash "<#user>:<user><key>" -> "<qty>:<id>", where <id>
--                            is the reservation id without its "<sale>." (the
--                            key names the sale; 16 bytes less per keyed
--                            reservation); entries written before hold the
--                            whole id, which is read as it is. A heal
--                            (heal_apply.lua) writes the entries of the
--                            orders it brings back as
--                            "<#user>:<user>\1<digest>", the key's
--                            IdempotencyDigest (a key holds no control
--                            character); they are read only when the key's
--                            own entry is missing and the sale was healed
-- KEYS[4]  sk:{sale}:res     hash of reservation records: the id's last 26
--                            characters -> "<qty>:<user>" when the id's own
--                            time is within 2 s of Redis TIME, else
--                            "<qty>@<reserved_at_ms>:<user>" (record.lua
--                            has the whole format)
-- KEYS[5]  sk:{sale}:outbox  stream, one entry per batch that reserved, with
--                            fields n (its reservations), at (their
--                            reserved_at_ms) and b: one line per
--                            reservation, in order, "<qty> <the id's last
--                            26 characters> <user>" (the key names the
--                            sale; a user id holds no control character).
--                            When a reservation of the batch came with an
--                            idempotency key, field k holds one line per
--                            reservation, in the same order: its key, or
--                            "" (a key holds no control character); the
--                            relay carries its digest into the order.
--                            Readers of before ignore k.
--                            Entries written before batches were one
--                            reservation each, with fields reservation_id,
--                            user_id, qty, reserved_at_ms
-- KEYS[6…] sk:{sale}:rl:<T>:<tolerance>  KEYS[6 + k] is the rate limit of
--          every request's check k (0-based): the base name of the
--          hashes that hold that limit's GCRA state (ratelimits.lua)
-- ARGV[1]  R, the rate checks of every request (#KEYS - 5, maybe 0), with
--          "a" appended for a batch of buyers that a sale's admission let
--          in (the lottery's draw, the queue's ticket holders), then
--          per request 4 + R values, flat and in order: reservation id,
--          user id, qty (integer >= 1), idempotency key ("" = none) after
--          its 22-character digest, and the limited key of each check
--
-- Returns either
--   an integer outcome code that answers every request of the batch (the sale
--   is not preheated, or the window is not open), or
--   an array with one element per request, in order: an integer outcome code,
--   or, for an idempotent replay, the id (bulk string) of the earlier
--   reservation; the replayed qty is the request's qty, since only an equal
--   qty replays; or, for a request refused by a rate limit,
--   {8, index of the refusing key among the request's (0-based), retry_after_us}.
-- Outcome codes: outcomes.lua, prepended to this script, names them.
-- HEALING and ADMISSION_REQUIRED answer a whole batch: the sale is being
-- rebuilt, or its admission (stock field `admission`) is not first come
-- and the batch was not let in by it.
--
-- Only reservations are stored under an idempotency key. A rejection is
-- re-evaluated when its key comes back: that costs nothing to store, and a
-- retry after stock was restored, or after the buyer freed their limit, may
-- now legitimately succeed.
--
-- The stock hash, TIME, the buyers' holdings and each rate limit's state
-- are read once per batch, and `reserved`, the holdings, the res hash and
-- the rate states and the outbox written once per batch; per request the
-- script calls Redis only for an idempotency key. (Each call from Lua
-- costs about a microsecond of Redis beyond the command's own work: with
-- a GET and a SET per check and an HGET and an HINCRBY per buyer, the two
-- rate limits were a third of the script; an outbox entry per reservation
-- was a quarter of it, and its relaying (read, pending list, ack, trim)
-- cost Redis half as much again.)

local stock = redis.call('HMGET', KEYS[1], 'total', 'reserved', 'limit', 'start_ms', 'end_ms', 'healing', 'outboxed', 'admission', 'heals')
if not stock[1] then
  return NOT_STARTED
end
if stock[6] then
  return HEALING
end
-- A sale whose admission is not first come (a lottery, a queue) takes only
-- the batches its admission let in, whose ARGV[1] ends in "a".
local per_arg = ARGV[1]
if string.byte(per_arg, -1) == 97 then
  per_arg = string.sub(per_arg, 1, -2)
elseif stock[8] then
  return ADMISSION_REQUIRED
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(stock[4]) then
  return NOT_STARTED
end
if now >= tonumber(stock[5]) then
  return ENDED
end
-- Built from strings so that no number formatting can turn it into 1.7e+12.
local now_ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))

local total = tonumber(stock[1])
local reserved = tonumber(stock[2])
local limit = tonumber(stock[3])
local before = reserved
-- A healed sale may hold idempotency entries in their digest's form.
local healed = stock[9] and stock[9] ~= '0'

-- Rate limits, checked before anything else of a request: a refused
-- request counts against none of its keys, an allowed one against all
-- (ratelimits.lua, prepended).
local per = tonumber(per_arg)
local stride = 4 + per
rate_open(6, per, tonumber(t[1]) * 1000000 + tonumber(t[2]), 2, stride, 4)

-- What each buyer of the batch holds, read at once.
local users, held = {}, {} -- held: user -> units held so far
for i = 2, #ARGV, stride do
  local user = ARGV[i + 1]
  if not held[user] then
    held[user] = true
    users[#users + 1] = user
  end
end
local had = redis.call('HMGET', KEYS[2], unpack(users))
for n = 1, #users do
  local user = users[n]
  held[user] = tonumber(had[n] or '0')
end

-- Decide every request first, reading Redis only. What earlier requests of
-- this batch changed is kept in these tables until the writes below.
local claimed = {} -- idempotency field -> "<qty>:<reservation id>"
local won = {}     -- ARGV offsets of the requests that reserved, in order
local won_keys = {} -- won's index -> its idempotency key, if it has one
local bought = {}  -- users whose held changed, in order
local out = {}
for i = 2, #ARGV, stride do
  local id, user, qtys, key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local qty = tonumber(qtys)
  local answer
  if per > 0 then
    local k, retry = rate_refusal(i)
    if k then
      answer = {RATE_LIMITED, k, retry}
    end
  end
  local field
  if key ~= '' then
    local digested = key
    key = string.sub(digested, 23)
    if not answer then
      field = #user .. ':' .. user .. key
      local prev = claimed[field] or redis.call('HGET', KEYS[3], field)
      if not prev and healed then
        prev = redis.call('HGET', KEYS[3], #user .. ':' .. user .. '\1' .. string.sub(digested, 1, 22))
      end
      if prev then
        local sep = string.find(prev, ':', 1, true)
        if tonumber(string.sub(prev, 1, sep - 1)) == qty then
          answer = string.sub(prev, sep + 1)
          if not string.find(answer, '.', 1, true) then
            -- The request's own id carries the same "<sale>.".
            answer = string.match(id, '^[^.]*%.') .. answer
          end
        else
          answer = KEY_REUSED
        end
      end
    end
  end
  if not answer then
    local h = held[user]
    if h + qty > limit then
      answer = LIMIT_EXCEEDED
    elseif reserved + qty > total then
      answer = SOLD_OUT
    else
      reserved = reserved + qty
      held[user] = h + qty
      bought[#bought + 1] = user
      won[#won + 1] = i
      if field then
        claimed[field] = qtys .. ':' .. id
        won_keys[#won] = key
      end
      answer = RESERVED
    end
  end
  out[#out + 1] = answer
end
rate_save()
if #won == 0 then
  return out
end

-- Then write, `reserved` first. A write here fails only on a key of the
-- wrong type; should one ever fail, Redis has then counted units it never
-- handed out (an undersell), never handed out units it does not count.
redis.call('HINCRBY', KEYS[1], 'reserved', reserved - before)
redis.call('HINCRBY', KEYS[1], 'seq', 1)
-- The outbox then holds outboxed - relayed reservations. A sale loaded
-- before that count existed has only entries of one reservation each in
-- its outbox: the count starts from their number.
if stock[7] then
  redis.call('HINCRBY', KEYS[1], 'outboxed', #won)
else
  local relayed = tonumber(redis.call('HGET', KEYS[1], 'relayed') or 0)
  redis.call('HSET', KEYS[1], 'outboxed', string.format('%d', relayed + redis.call('XLEN', KEYS[5]) + #won))
end
-- The millisecond time in the first 48 bits of a reservation id's last
-- 26 (base32) characters, or nil: a record whose id carries its time
-- (near enough) need not store it.
local b32 = {
  [48] = 0, [49] = 1, [50] = 2, [51] = 3, [52] = 4, [53] = 5, [54] = 6, [55] = 7, [56] = 8, [57] = 9,
  [65] = 10, [66] = 11, [67] = 12, [68] = 13, [69] = 14, [70] = 15, [71] = 16, [72] = 17,
  [74] = 18, [75] = 19, [77] = 20, [78] = 21, [80] = 22, [81] = 23, [82] = 24, [83] = 25,
  [84] = 26, [86] = 27, [87] = 28, [88] = 29, [89] = 30, [90] = 31,
} -- "0123456789ABCDEFGHJKMNPQRSTVWXYZ" by byte
local function id_ms(short)
  -- One call into C for the ten characters, and no table: a call from Lua
  -- into C costs more than the arithmetic.
  local c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = string.byte(short, 1, 10)
  local d1, d2, d3, d4, d5 = b32[c1], b32[c2], b32[c3], b32[c4], b32[c5]
  local d6, d7, d8, d9, d10 = b32[c6], b32[c7], b32[c8], b32[c9], b32[c10]
  if not (d1 and d2 and d3 and d4 and d5 and d6 and d7 and d8 and d9 and d10) then
    return nil
  end
  local v = ((((d1 * 32 + d2) * 32 + d3) * 32 + d4) * 32 + d5) * 33554432 -- 32^5
    + (((d6 * 32 + d7) * 32 + d8) * 32 + d9) * 32 + d10
  return math.floor(v / 4)
end

local holdings = {} -- user, units pairs for one HSET of the buyers hash
local units = {}    -- decimal's memo (ratelimits.lua) for the holdings
for n = 1, #bought do
  local user = bought[n]
  local h = held[user]
  if h then
    holdings[#holdings + 1] = user
    holdings[#holdings + 1] = decimal(units, h)
    held[user] = nil -- each buyer once
  end
end
redis.call('HSET', KEYS[2], unpack(holdings))
local records = {} -- field, value pairs for one HSET of the res hash
local lines = {}   -- the outbox entry's lines
local keys = {}    -- the outbox entry's keys, a line each
local keyed = false
for n = 1, #won do
  local i = won[n]
  local id, user, qtys, key = ARGV[i], ARGV[i + 1], ARGV[i + 2], won_keys[n] or ''
  -- The caller checked the id's shape: "<sale>." and 26 characters.
  local short = string.sub(id, -26)
  if key ~= '' then
    redis.call('HSET', KEYS[3], #user .. ':' .. user .. key, qtys .. ':' .. short)
    keyed = true
  end
  keys[n] = key
  local ms = id_ms(short)
  records[#records + 1] = short
  lines[n] = qtys .. ' ' .. short .. ' ' .. user
  if ms and math.abs(now - ms) <= 2000 then
    records[#records + 1] = qtys .. ':' .. user
  else
    records[#records + 1] = qtys .. '@' .. now_ms .. ':' .. user
  end
end
redis.call('HSET', KEYS[4], unpack(records))
if keyed then
  redis.call('XADD', KEYS[5], '*', 'n', string.format('%d', #won), 'at', now_ms, 'b', table.concat(lines, '\n'),
    'k', table.concat(keys, '\n'))
else
  redis.call('XADD', KEYS[5], '*', 'n', string.format('%d', #won), 'at', now_ms, 'b', table.concat(lines, '\n'))
end
return out
