-- fencebatch.lua: raise leases' fence counters to their tokens, only
-- where the lock is ours (the fencing round of a batch whose nodes'
-- counters disagreed; per lease on a Redis Cluster).
-- KEYS[i] the hash of lease i (see acquirebatch.lua)
-- ARGV[1] counter expiry ms (as in acquirebatch.lua);
-- for lease i: ARGV[2i] value, ARGV[2i+1] token.
-- Returns one integer per lease: 1 if the counter was raised to the token
-- (or already at it or above) while the lock holds the lease's value, 0
-- if the lock is not ours.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fexp = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local s = redis.call('HMGET', key, 'h', 'd', 'f', 'e', 'v')
  if s[1] ~= ARGV[2 * i] or tonumber(s[2]) <= now then
    out[i] = 0
  else
    local token = ARGV[2 * i + 1]
    if tonumber(token) > tonumber(s[3] or '0') then
      redis.call('HSET', key, 'f', token)
    end
    if not (s[4] or s[5]) and redis.call('PTTL', key) < fexp then
      redis.call('PEXPIRE', key, fexp)
    end
    out[i] = 1
  end
end
return out
