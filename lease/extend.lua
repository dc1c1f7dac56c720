-- extend.lua: compare-and-pexpire.
-- KEYS[1] lock; ARGV[1] value, ARGV[2] ttl ms. Returns 1 if extended, 0 if not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
