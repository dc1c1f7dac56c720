-- acquire.lua: take the lease if free (or re-enter it with our own value).
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] completed epoch
-- ARGV[1] value (token + " " + owner), ARGV[2] ttl ms, ARGV[3] epoch (0 = none)
-- ARGV[4] fencing floor (unix µs; "0" = no fencing): a grant also raises the
--         fence counter to max(counter + 1, ARGV[4]), while the lock is ours.
-- ARGV[5] fence counter expiry ms: the counter is kept at least that long
--         after each raise (it never outlives it by more than the longest
--         expiry in use), so a key nobody takes again leaves nothing behind.
-- Returns {status, done_epoch, fence, holder_value, holder_pttl}
--   status 1 granted, 0 held by another, 2 epoch already completed
--   fence is the counter after the script: raised by a grant with fencing.
local cur = redis.call('GET', KEYS[1])
local done = redis.call('GET', KEYS[3]) or '0'
local fence = redis.call('GET', KEYS[2]) or '0'
local e = tonumber(ARGV[3])
if e > 0 and tonumber(done) >= e then
  return {2, done, fence, cur or '', redis.call('PTTL', KEYS[1])}
end
if cur and cur ~= ARGV[1] then
  return {0, done, fence, cur, redis.call('PTTL', KEYS[1])}
end
if cur then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if ARGV[4] ~= '0' then
  local ms = tonumber(ARGV[5])
  local left = redis.call('PTTL', KEYS[2])
  if left > ms then
    ms = left
  end
  if tonumber(ARGV[4]) > tonumber(fence) then
    redis.call('SET', KEYS[2], ARGV[4], 'PX', ms)
    fence = ARGV[4]
  else
    fence = redis.call('INCR', KEYS[2])
    redis.call('PEXPIRE', KEYS[2], ms)
  end
end
return {1, done, fence, '', 0}
