-- inspect.lua: read the whole state of a lease.
-- KEYS[1] the lease's hash (see acquirebatch.lua)
-- Returns {holder_value, pttl, fence, done_epoch, note_version, note}:
-- holder_value '' and pttl -2 when no lock is held.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'h', 'd', 'f', 'e', 'v', 'n')
local cur, pttl = s[1], -2
if cur then
  pttl = tonumber(s[2]) - now
  if pttl <= 0 then
    cur, pttl = nil, -2
  end
end
return {cur or '', pttl, s[3] or '0', s[4] or '0', s[5] or '-1', s[6] or ''}
