-- ratecheck.lua: count a batch of one sale's requests against their rate
-- limits, as reserve.lua counts claims (the same hashes and GCRA, so one
-- budget): lottery entries and queue joins, whose scripts take no checks.
--
-- KEYS[1…] sk:{sale}:rl:<T>:<tolerance>  the limit of every request's check
--          k is KEYS[1 + k]: the base name of its GCRA hashes (reserve.lua
--          says how generations <base>:<g> are read, written and expire)
-- ARGV[1]  R, the checks of every request (#KEYS)
-- ARGV[2…] per request R values: the limited key of each check
--
-- Returns one value per request, in order: 0 when every check allowed it
-- (and counted it against all), or {k, retry_after_us} when check k
-- (0-based) refused it (counted against none).
local per = tonumber(ARGV[1])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limits = {} -- base name -> {T, tol, g, base, fields, seen, tats, dirty}
local check = {}  -- check k (0-based) -> its limit
for k = 0, per - 1 do
  local base = KEYS[1 + k]
  local lim = limits[base]
  if not lim then
    local ts, tols = string.match(base, ':(%d+):(%d+)$')
    local tol = tonumber(tols)
    lim = {T = tonumber(ts), tol = tol, g = math.floor(now_us / tol), base = base, fields = {}, seen = {}, tats = {}, dirty = {}}
    limits[base] = lim
  end
  check[k] = lim
end
for i = 2, #ARGV, per do
  for k = 0, per - 1 do
    local lim, f = check[k], ARGV[i + k]
    if not lim.seen[f] then
      lim.seen[f] = true
      lim.fields[#lim.fields + 1] = f
    end
  end
end
for _, lim in pairs(limits) do
  local cur = redis.call('HMGET', lim.base .. ':' .. lim.g, unpack(lim.fields))
  local missing = {}
  for n = 1, #lim.fields do
    local f, v = lim.fields[n], cur[n]
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
local out, next_tat = {}, {}
for i = 2, #ARGV, per do
  local refused
  for k = 0, per - 1 do
    local lim = check[k]
    local tat = lim.tats[ARGV[i + k]]
    if tat < now_us then
      tat = now_us
    end
    local new_tat = tat + lim.T
    local allow_at = new_tat - lim.tol
    if allow_at > now_us then
      refused = {k, allow_at - now_us}
      break
    end
    next_tat[k] = new_tat
  end
  if refused then
    out[#out + 1] = refused
  else
    for k = 0, per - 1 do
      local lim, f = check[k], ARGV[i + k]
      lim.tats[f] = next_tat[k]
      lim.dirty[f] = true
    end
    out[#out + 1] = 0
  end
end
for _, lim in pairs(limits) do
  local writes = {}
  for n = 1, #lim.fields do
    local f = lim.fields[n]
    if lim.dirty[f] then
      writes[#writes + 1] = f
      writes[#writes + 1] = string.format('%d', lim.tats[f])
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
return out
