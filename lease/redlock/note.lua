-- note.lua: store a note if its version is newer than the stored one.
-- KEYS[1] the lease's hash (fields v and n, see acquirebatch.lua; a hash
-- with a note is kept without TTL); ARGV[1] version, ARGV[2] note.
-- Returns 1 if stored.
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '-1')
if tonumber(ARGV[1]) > v then
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 'n', ARGV[2])
  redis.call('PERSIST', KEYS[1])
  return 1
end
return 0
