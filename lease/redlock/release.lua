-- release.lua: compare-and-delete.
-- KEYS[1] lock; ARGV[1] value. Returns 1 if deleted, 0 if not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
