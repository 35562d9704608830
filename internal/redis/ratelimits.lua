-- ratelimits.lua: a library, named before the script that uses it
-- (reserve.lua, lottery_enter.lua, queue_join.lua): the
-- rate limits of one batch of a sale's requests, counted with GCRA in
-- hashes of the sale's slot, so that claims, lottery entries and queue
-- joins share one budget a limit.
--
-- A limit's KEYS entry is sk:{sale}:rl:<T>:<tolerance> (T and tolerance in
-- microseconds end its name): the base name of the hashes that hold its
-- GCRA state, <base>:<g> for generation g = floor(now / tolerance), field
-- = the limited key ("ip:…", "user:…"), value = its theoretical arrival
-- time (see ratelimit.lua, whose algorithm this is). A state written in
-- generation g is at most tolerance ahead of its write, so it is spent by
-- the start of g + 2: a batch reads generations g and g - 1 only, writes
-- g, and each hash expires at the start of g + 2. The hashes are keys of
-- the sale's slot that the script derives, not declares. Checks of the
-- same limit share its hashes.
--
-- rate_open(kfirst, per, now_us, afirst, stride, off) reads the state: the
-- batch's requests are at ARGV afirst, afirst + stride, …; request i's
-- check k (0-based, of per) limits ARGV[i + off + k] under KEYS[kfirst + k].
-- rate_refusal(i) then decides request i, in order: nil when every check
-- allowed it (and it is counted against all), or k, retry_after_us when
-- check k refused it (counted against none). rate_save() writes the state
-- back, once per batch. Each limit's state is read with one HMGET of each
-- of the two live generations and written with one HSET.
-- decimal(memo, n) is n's decimal text, made once per memo table: a
-- string.format is some 2,500 instructions, and a batch's numbers are
-- mostly alike (TATs of now + T, holdings of one unit). reserve.lua uses
-- it too.
local function decimal(memo, n)
  local t = memo[n]
  if not t then
    t = string.format('%d', n)
    memo[n] = t
  end
  return t
end

local rate_limits = {} -- base name -> {T, tol, g, base, fields, seen, tats, dirty}
local rate_check = {}  -- check k (0-based) -> its limit
local rate_per, rate_off, rate_now = 0, 0, 0
local rate_next = {}   -- scratch of rate_refusal: check k -> its new TAT

local function rate_open(kfirst, per, now_us, afirst, stride, off)
  rate_per, rate_off, rate_now = per, off, now_us
  if per == 0 then
    return
  end
  for k = 0, per - 1 do
    local base = KEYS[kfirst + k]
    local lim = rate_limits[base]
    if not lim then
      local ts, tols = string.match(base, ':(%d+):(%d+)$')
      local tol = tonumber(tols)
      lim = {T = tonumber(ts), tol = tol, g = math.floor(now_us / tol), base = base, fields = {}, seen = {}, tats = {}, dirty = {}}
      rate_limits[base] = lim
    end
    rate_check[k] = lim
  end
  for i = afirst, #ARGV, stride do
    for k = 0, per - 1 do
      local lim, f = rate_check[k], ARGV[i + off + k]
      if not lim.seen[f] then
        lim.seen[f] = true
        lim.fields[#lim.fields + 1] = f
      end
    end
  end
  -- A key's state in generation g is never older than its state in g - 1
  -- (a check only moves a TAT forward, and writes it to g), so g - 1 is
  -- read only for the keys g does not hold. A generation's hash gets its
  -- expiry from the batch that makes it, which found none of its keys in
  -- it: a batch that found one knows the hash has its expiry already.
  for _, lim in pairs(rate_limits) do
    local cur = redis.call('HMGET', lim.base .. ':' .. lim.g, unpack(lim.fields))
    local missing = {}
    local fields = lim.fields
    for n = 1, #fields do
      local f, v = fields[n], cur[n]
      if v then
        lim.tats[f] = tonumber(v)
        lim.made = true
      else
        lim.tats[f] = 0
        missing[#missing + 1] = f
      end
    end
    if #missing > 0 then
      local prev = redis.call('HMGET', lim.base .. ':' .. (lim.g - 1), unpack(missing))
      for n = 1, #missing do
        lim.tats[missing[n]] = tonumber(prev[n] or 0)
      end
    end
  end
end

local function rate_refusal(i)
  local now_us, at = rate_now, i + rate_off
  for k = 0, rate_per - 1 do
    local lim = rate_check[k]
    local tat = lim.tats[ARGV[at + k]]
    if tat < now_us then
      tat = now_us
    end
    local new_tat = tat + lim.T
    local allow_at = new_tat - lim.tol
    if allow_at > now_us then
      return k, allow_at - now_us
    end
    rate_next[k] = new_tat
  end
  for k = 0, rate_per - 1 do
    local lim, f = rate_check[k], ARGV[at + k]
    lim.tats[f] = rate_next[k]
    lim.dirty[f] = true
  end
  return nil
end

local function rate_save()
  local text = {} -- decimal's memo for the batch's TATs
  for _, lim in pairs(rate_limits) do
    local writes = {}
    local fields = lim.fields
    for n = 1, #fields do
      local f = fields[n]
      if lim.dirty[f] then
        writes[#writes + 1] = f
        writes[#writes + 1] = decimal(text, lim.tats[f])
      end
    end
    if #writes > 0 then
      local cur = lim.base .. ':' .. lim.g
      redis.call('HSET', cur, unpack(writes))
      if not lim.made then
        redis.call('PEXPIREAT', cur, string.format('%d', math.ceil((lim.g + 2) * lim.tol / 1000)))
      end
    end
  end
end
