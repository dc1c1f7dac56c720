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
-- Every key is read with one MGET first; `wrote` keeps what this call
-- wrote since, so that a key listed twice reads its own write, as it
-- would with one call per lease.
local floor = ARGV[1]
local fexp = tonumber(ARGV[2])
local out = {}
local all = redis.call('MGET', unpack(KEYS))
local wrote = {}
local function get(j)
  local v = wrote[KEYS[j]]
  if v == nil then
    v = all[j]
  end
  return v or nil
end
for i = 1, #KEYS / 3 do
  local lock, fkey = KEYS[3 * i - 2], KEYS[3 * i - 1]
  local value, ttl, e = ARGV[3 * i], ARGV[3 * i + 1], tonumber(ARGV[3 * i + 2])
  local cur = get(3 * i - 2)
  local had = get(3 * i - 1)
  local fence = had or '0'
  local done = get(3 * i) or '0'
  if e > 0 and tonumber(done) >= e then
    out[i] = '2 ' .. done .. ' ' .. fence .. ' ' .. string.format('%d', redis.call('PTTL', lock)) .. ' ' .. (cur or '')
  elseif cur and cur ~= value then
    out[i] = '0 ' .. done .. ' ' .. fence .. ' ' .. string.format('%d', redis.call('PTTL', lock)) .. ' ' .. cur
  else
    if cur then
      redis.call('PEXPIRE', lock, ttl)
    else
      redis.call('SET', lock, value, 'PX', ttl)
      wrote[lock] = value
    end
    if floor ~= '0' then
      local ms = fexp
      if had then
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
      wrote[fkey] = fence
    end
    out[i] = '1 ' .. done .. ' ' .. fence
  end
end
return out
