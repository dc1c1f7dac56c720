-- birth.lua: the node's data marker, read after every round of requests.
-- KEYS[1] the marker key; ARGV[1] a random nonce of the calling client.
-- The marker is written once into an empty dataset (the first round after a
-- flush, a restart without persistence or a sync from an empty master) and
-- holds the server's time then, in µs, and the writer's nonce: a dataset
-- that was replaced by another server's copy shows a different value.
-- Returns {marker ('' if it is missing and could not be written), server time µs}
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local b = redis.call('GET', KEYS[1])
if b then
  return {b, now}
end
b = now .. ' ' .. ARGV[1]
local ok = redis.pcall('SET', KEYS[1], b)
if type(ok) == 'table' and ok.err then
  return {'', now}
end
return {b, now}
