-- fencebatch.lua: fence.lua for many leases in one call (the fencing round
-- of a batch whose nodes' counters disagreed).
-- KEYS: for lease i (1-based), KEYS[2i-1] lock, KEYS[2i] fence counter
-- ARGV[1] counter expiry ms (as in fence.lua, shared by every lease);
-- for lease i: ARGV[2i] value, ARGV[2i+1] token.
-- Returns one integer per lease, fence.lua's reply: 1 if the counter was
-- raised to the token (or already at it or above) while the lock holds
-- the lease's value, 0 if the lock is not ours.
-- Each lease is decided exactly as fence.lua decides it; a key listed
-- twice reads this call's own write.
local fexp = tonumber(ARGV[1])
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
for i = 1, #KEYS / 2 do
  local fkey = KEYS[2 * i]
  if get(2 * i - 1) ~= ARGV[2 * i] then
    out[i] = 0
  else
    local ms = fexp
    local left = redis.call('PTTL', fkey)
    if left > ms then
      ms = left
    end
    local cur = tonumber(get(2 * i) or '0')
    local token = ARGV[2 * i + 1]
    if tonumber(token) > cur then
      redis.call('SET', fkey, token, 'PX', ms)
      wrote[fkey] = token
    else
      redis.call('PEXPIRE', fkey, ms)
    end
    out[i] = 1
  end
end
return out
