-- releasebatch.lua: release.lua for many leases in one call (the cleanup
-- of a batch's lost attempts).
-- KEYS[i] lock of lease i; ARGV[i] its value. Each lock is deleted only if
-- it holds that value. Returns the number deleted.
local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    n = n + redis.call('DEL', KEYS[i])
  end
end
return n
