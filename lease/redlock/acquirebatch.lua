-- acquirebatch.lua: take leases if free (or re-enter them with our own
-- value): one call per node for a chunk of a batch, and per lease on a
-- Redis Cluster (a single Acquire is a batch of one).
-- Each lease is one hash (see leaseKey): h holder value, d lock deadline
-- (server ms), f fence counter, e completed epoch, v and n note version
-- and note. The lock is held while h is set and d is in the future.
-- KEYS[i] the hash of lease i (1-based)
-- ARGV[1] fencing floor (unix µs; "0" = no fencing): a grant also raises
--         the fence counter to max(counter + 1, floor)
-- ARGV[2] fence counter expiry ms: a hash without a completed epoch or a
--         note is kept at least that long after each raise (and at least
--         the lease's TTL), so a key nobody takes again leaves nothing
--         behind; one with either is kept without TTL
-- for lease i: ARGV[3i] value, ARGV[3i+1] ttl ms, ARGV[3i+2] epoch (0 = none)
-- Returns one string per lease:
--   "1 done fence" granted (fence: the counter after the grant),
--   "0 done fence pttl holder" held by another,
--   "2 done fence pttl holder" epoch already completed (pttl -2 and holder
--   empty when no lock is held; the holder may contain spaces, so it
--   comes last).
-- Numbers from Redis are Lua doubles: they are formatted with %d (a fence
-- counter has 16 digits, more than tostring's 14). A key listed twice
-- reads this call's own write.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local floor = ARGV[1]
local fexp = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local value, ttl, e = ARGV[3 * i], tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local s = redis.call('HMGET', key, 'h', 'd', 'f', 'e', 'v')
  local cur, left = s[1], -2
  if cur then
    left = tonumber(s[2]) - now
    if left <= 0 then
      cur, left = nil, -2
    end
  end
  local fence = s[3] or '0'
  local done = s[4] or '0'
  if e > 0 and tonumber(done) >= e then
    out[i] = '2 ' .. done .. ' ' .. fence .. ' ' .. string.format('%d', left) .. ' ' .. (cur or '')
  elseif cur and cur ~= value then
    out[i] = '0 ' .. done .. ' ' .. fence .. ' ' .. string.format('%d', left) .. ' ' .. cur
  else
    local keep = ttl
    local deadline = string.format('%d', now + ttl)
    if floor ~= '0' then
      if tonumber(floor) > tonumber(fence) then
        fence = floor
      else
        fence = string.format('%d', tonumber(fence) + 1)
      end
      keep = math.max(ttl, fexp)
      redis.call('HSET', key, 'h', value, 'd', deadline, 'f', fence)
    else
      redis.call('HSET', key, 'h', value, 'd', deadline)
    end
    if not (s[4] or s[5]) then
      if not (s[1] or s[3]) or redis.call('PTTL', key) < keep then
        redis.call('PEXPIRE', key, keep)
      end
    end
    out[i] = '1 ' .. done .. ' ' .. fence
  end
end
return out
