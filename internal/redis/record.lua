-- record.lua: the res hash's records, read and rewritten the same way by
-- every script that touches them (restore.lua and heal_apply.lua begin
-- with this file; reserve.lua writes the compact form itself).
--
-- A reservation "<sale>.<26 base32 chars>" is recorded under the field of
-- its last 26 characters (the key names the sale already) as
--   "<qty>:<user>"         active, reserved at the id's own millisecond
--                          time (its first 48 bits), which reserve.lua
--                          found within 2 s of Redis TIME
--   "<qty>@<ms>:<user>"    active, reserved at ms (Redis TIME): the id's
--                          time was further off, or it has none
--   "-" and either form    restored
-- Records written before this form are under the whole id, as
-- "<status>:<qty>:<reserved_at_ms>:<user>" (status active or restored),
-- and keep that form when restored or released. The user id goes last
-- because it may itself contain ':'.

-- record_get returns the field and value of reservation id's record in
-- the res hash key, or nil when there is none.
local function record_get(key, id)
  local short = string.match(id, '%.([^.]*)$')
  if short then
    local v = redis.call('HGET', key, short)
    if v then
      return short, v
    end
  end
  local v = redis.call('HGET', key, id)
  if v then
    return id, v
  end
  return nil
end

-- record_parse returns a record's status ('active', 'restored' or, for
-- an old record, whatever it says), qty (a string of digits), user and
-- the value that marks it restored; nil when it is malformed.
local function record_parse(rec)
  local status, qtys, at, user = string.match(rec, '^(%a+):(%d+):(%d+):(.+)$')
  if status then
    return status, qtys, user, 'restored:' .. qtys .. ':' .. at .. ':' .. user
  end
  local neg, head, u = string.match(rec, '^(%-?)([%d@]+):(.+)$')
  if not head then
    return nil
  end
  local q = string.match(head, '^(%d+)$') or string.match(head, '^(%d+)@%d+$')
  if not q then
    return nil
  end
  if neg == '-' then
    return 'restored', q, u, rec
  end
  return 'active', q, u, '-' .. rec
end

