-- release.lua: compare-and-delete of a lease's lock (the fields h and d
-- of its hash, see acquirebatch.lua; a hash left without fields is gone).
-- KEYS[1] the hash; ARGV[1] value. Returns 1 if removed, 0 if not ours.
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'h', 'd')
  return 1
end
return 0
