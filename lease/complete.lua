-- complete.lua: mark an epoch completed, then release if still ours.
-- KEYS[1] lock, KEYS[2] completed epoch; ARGV[1] value, ARGV[2] epoch.
-- The mark is written whether or not we still hold the lock: it is only ever
-- sent after the work of that epoch finished.
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > cur then
  redis.call('SET', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 1
