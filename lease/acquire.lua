-- acquire.lua: take the lease if free (or re-enter it with our own value).
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] completed epoch
-- ARGV[1] value (token + " " + owner), ARGV[2] ttl ms, ARGV[3] epoch (0 = none)
-- Returns {status, done_epoch, fence, holder_value, holder_pttl}
--   status 1 granted, 0 held by another, 2 epoch already completed
local cur = redis.call('GET', KEYS[1])
local done = redis.call('GET', KEYS[3]) or '0'
local fence = redis.call('GET', KEYS[2]) or '0'
local e = tonumber(ARGV[3])
if e > 0 and tonumber(done) >= e then
  return {2, done, fence, cur or '', redis.call('PTTL', KEYS[1])}
end
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, done, fence, '', 0}
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, done, fence, '', 0}
end
return {0, done, fence, cur, redis.call('PTTL', KEYS[1])}
