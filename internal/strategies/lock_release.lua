-- lock_release.lua: release a lock only if this caller still owns it, so a
-- holder whose lock expired cannot delete the lock of the next holder.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token the caller set with SET NX PX
--
-- Returns 1 when released, 0 when the lock was not (or no longer) ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
