-- note.lua: store a note if its version is newer than the stored one.
-- KEYS[1] note hash; ARGV[1] version, ARGV[2] note. Returns 1 if stored.
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '-1')
if tonumber(ARGV[1]) > v then
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 'n', ARGV[2])
  return 1
end
return 0
