-- complete.lua: mark an epoch completed and release, unless a newer holder
-- took the key since our acquisition.
-- KEYS[1] the lease's hash (see acquirebatch.lua)
-- ARGV[1] value, ARGV[2] epoch, ARGV[3] our fencing token ("0": none),
-- ARGV[4] "1": only check (answer as below, write nothing)
-- Returns 1 when the epoch is marked (now or before), 0 when a newer holder
-- took the key: its lock is there, or the fence counter went past ours
-- (a newer holder that came and went). Our lock gone with its expiry and
-- nobody after us is not a newer holder: the mark is written, since it is
-- only ever sent after the work of that epoch finished. A marked hash is
-- kept without TTL.
local s = redis.call('HMGET', KEYS[1], 'e', 'h', 'd', 'f')
local e = tonumber(ARGV[2])
if tonumber(s[1] or '0') >= e then
  return 1
end
local lock = s[2]
if lock then
  local t = redis.call('TIME')
  if tonumber(s[3]) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    lock = nil
  end
end
if lock and lock ~= ARGV[1] then
  return 0
end
if not lock and ARGV[3] ~= '0' and s[4] and tonumber(s[4]) > tonumber(ARGV[3]) then
  return 0
end
if ARGV[4] == '1' then
  return 1
end
redis.call('HSET', KEYS[1], 'e', ARGV[2])
if s[2] then
  redis.call('HDEL', KEYS[1], 'h', 'd')
end
redis.call('PERSIST', KEYS[1])
return 1
