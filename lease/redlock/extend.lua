-- extend.lua: move the lock's deadline, spreading the lease to nodes that
-- lack it. KEYS[1] the lease's hash (see acquirebatch.lua)
-- ARGV[1] value, ARGV[2] ttl ms, ARGV[3] epoch (0 = none),
-- ARGV[4] "1" to set the lock where it is missing (only while the caller's
--         lease is valid, so no other client can hold a quorum), "0" not to.
-- Returns 1 if extended, 2 if the lock was missing and is now ours,
--         0 if not ours (held by another, or missing and not set).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'h', 'd', 'e', 'v', 'f')
local cur = s[1]
if cur and tonumber(s[2]) <= now then
  cur = nil
end
local ttl = tonumber(ARGV[2])
local deadline = string.format('%d', now + ttl)
local r = 1
if cur == ARGV[1] then
  redis.call('HSET', KEYS[1], 'd', deadline)
else
  if cur or ARGV[4] ~= '1' then
    return 0
  end
  local e = tonumber(ARGV[3])
  if e > 0 and tonumber(s[3] or '0') >= e then
    return 0
  end
  redis.call('HSET', KEYS[1], 'h', ARGV[1], 'd', deadline)
  r = 2
end
if not (s[3] or s[4]) then
  if not (s[1] or s[5]) or redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
return r
