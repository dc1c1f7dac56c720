-- fence.lua: raise the fencing counter to ARGV[2], only while we hold the lock.
-- KEYS[1] lock, KEYS[2] fence counter; ARGV[1] value, ARGV[2] token
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > cur then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
