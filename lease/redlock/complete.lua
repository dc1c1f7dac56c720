-- complete.lua: mark an epoch completed and release, unless a newer holder
-- took the key since our acquisition.
-- KEYS[1] lock, KEYS[2] completed epoch, KEYS[3] fence counter
-- ARGV[1] value, ARGV[2] epoch, ARGV[3] our fencing token ("0": none),
-- ARGV[4] "1": only check (answer as below, write nothing)
-- Returns 1 when the epoch is marked (now or before), 0 when a newer holder
-- took the key: its lock is there, or the fence counter went past ours
-- (a newer holder that came and went). Our lock gone with its expiry and
-- nobody after us is not a newer holder: the mark is written, since it is
-- only ever sent after the work of that epoch finished.
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local e = tonumber(ARGV[2])
if cur >= e then
  return 1
end
local lock = redis.call('GET', KEYS[1])
if lock and lock ~= ARGV[1] then
  return 0
end
if not lock and ARGV[3] ~= '0' then
  local fence = redis.call('GET', KEYS[3])
  if fence and tonumber(fence) > tonumber(ARGV[3]) then
    return 0
  end
end
if ARGV[4] == '1' then
  return 1
end
redis.call('SET', KEYS[2], ARGV[2])
if lock then
  redis.call('DEL', KEYS[1])
end
return 1
