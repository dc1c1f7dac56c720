-- acquirebatch.lua: acquire.lua for many leases in one call (one call per
-- node for a chunk of a batch; the single-key Acquire uses it too).
-- KEYS: for lease i (1-based), KEYS[3i-2] lock, KEYS[3i-1] fence counter,
--       KEYS[3i] completed epoch
-- ARGV[1] fencing floor (unix µs; "0" = no fencing), ARGV[2] fence counter
--         expiry ms (both as in acquire.lua, shared by every lease)
-- for lease i: ARGV[3i] value, ARGV[3i+1] ttl ms, ARGV[3i+2] epoch (0 = none)
-- Returns one string per lease, the fields of acquire.lua's reply:
--   "1 done fence" granted, "0 done fence pttl holder" held by another,
--   "2 done fence pttl holder" epoch already completed (holder may be
--   empty; it may contain spaces, so it comes last).
-- Each lease is decided exactly as acquire.lua decides it. Numbers from
-- Redis are Lua doubles: they are formatted with %d (a fence counter has
-- 16 digits, more than tostring's 14).
local floor = ARGV[1]
local fexp = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS / 3 do
  local lock, fkey, ekey = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local value, ttl, e = ARGV[3 * i], ARGV[3 * i + 1], tonumber(ARGV[3 * i + 2])
  local got = redis.call('MGET', lock, ekey, fkey)
  local cur = got[1]
  local done = got[2] or '0'
  local fence = got[3] or '0'
  if e > 0 and tonumber(done) >= e then
    out[i] = '2 ' .. done .. ' ' .. fence .. ' ' .. string.format('%d', redis.call('PTTL', lock)) .. ' ' .. (cur or '')
  elseif cur and cur ~= value then
    out[i] = '0 ' .. done .. ' ' .. fence .. ' ' .. string.format('%d', redis.call('PTTL', lock)) .. ' ' .. cur
  else
    if cur then
      redis.call('PEXPIRE', lock, ttl)
    else
      redis.call('SET', lock, value, 'PX', ttl)
    end
    if floor ~= '0' then
      local ms = fexp
      if got[3] then
        -- (a missing counter has no expiry to keep)
        local left = redis.call('PTTL', fkey)
        if left > ms then
          ms = left
        end
      end
      if tonumber(floor) > tonumber(fence) then
        redis.call('SET', fkey, floor, 'PX', ms)
        fence = floor
      else
        fence = string.format('%d', redis.call('INCR', fkey))
        redis.call('PEXPIRE', fkey, ms)
      end
    end
    out[i] = '1 ' .. done .. ' ' .. fence
  end
end
return out
