-- birth.lua: the node's data marker, read after every round of requests.
-- KEYS[1] the marker key; ARGV[1] a random nonce of the calling client and
-- its layout of keys ("NONCE LAYOUT", see layout.go).
-- The marker is written once into an empty dataset (the first round after a
-- flush, a restart without persistence or a sync from an empty master) and
-- holds the server's time then, in µs, the writer's nonce and its layout: a dataset
-- that was replaced by another server's copy shows a different value.
-- It also returns the server's master_replid, which changes on every
-- restart and promotion: a master demoted and promoted again keeps its
-- connections and may keep the same marker (a copy of its own, synced
-- back from a former replica), but not its replication ID.
-- Returns {marker ('' if it is missing and could not be written), server time µs, master_replid}
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local rid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)') or ''
local b = redis.call('GET', KEYS[1])
if b then
  return {b, now, rid}
end
b = now .. ' ' .. ARGV[1]
local ok = redis.pcall('SET', KEYS[1], b)
if type(ok) == 'table' and ok.err then
  return {'', now, rid}
end
return {b, now, rid}
