-- releasebatch.lua: release.lua for many leases in one call (the cleanup
-- of a batch's lost attempts).
-- KEYS[i] the hash of lease i; ARGV[i] its value. Each lock is removed
-- only if it holds that value. Returns the number removed.
local n = 0
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'h') == ARGV[i] then
    redis.call('HDEL', KEYS[i], 'h', 'd')
    n = n + 1
  end
end
return n
