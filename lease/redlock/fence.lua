-- fence.lua: raise the fencing counter to ARGV[2], only while we hold the lock.
-- KEYS[1] lock, KEYS[2] fence counter; ARGV[1] value, ARGV[2] token,
-- ARGV[3] counter expiry ms (as in acquire.lua: kept at least that long).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ms = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[2])
if left > ms then
  ms = left
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > cur then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ms)
else
  redis.call('PEXPIRE', KEYS[2], ms)
end
return 1
