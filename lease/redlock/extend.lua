-- extend.lua: compare-and-pexpire, spreading the lease to nodes that lack it.
-- KEYS[1] lock, KEYS[2] completed epoch
-- ARGV[1] value, ARGV[2] ttl ms, ARGV[3] epoch (0 = none),
-- ARGV[4] "1" to set the lock where it is missing (only while the caller's
--         lease is valid, so no other client can hold a quorum), "0" not to.
-- Returns 1 if extended, 2 if the lock was missing and is now ours,
--         0 if not ours (held by another, or missing and not set).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if cur or ARGV[4] ~= '1' then
  return 0
end
local e = tonumber(ARGV[3])
if e > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= e then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2
