-- log.lua: a bounded log (see store.go).
-- KEYS[1] the log: a sorted set of record IDs scored by the record's At
--         (unix ms; equal scores are ordered by ID).
-- KEYS[2] its records: a hash ID -> data, plus the field ' limit' (IDs
--         have no spaces) holding the limit of the last append.
-- ARGV[1] is the operation:
--   append ID AT DATA LIMIT -> 1 added, 0 the ID was already there (nothing
--                              changes but the limit); then the oldest
--                              records beyond LIMIT are deleted
--   read N                  -> {LIMIT, ID, AT, DATA, ...}: the limit of the
--                              last append ('' if none) and up to N records,
--                              newest first
local op = ARGV[1]
if op == 'append' then
  local limit = tonumber(ARGV[5])
  local added = redis.call('ZADD', KEYS[1], 'NX', ARGV[3], ARGV[2])
  if added == 1 then
    redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
  end
  redis.call('HSET', KEYS[2], ' limit', ARGV[5])
  local extra = redis.call('ZCARD', KEYS[1]) - limit
  if extra > 0 then
    local old = redis.call('ZRANGE', KEYS[1], 0, extra - 1)
    for i = 1, #old, 500 do
      redis.call('HDEL', KEYS[2], unpack(old, i, math.min(i + 499, #old)))
    end
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1)
  end
  return added
elseif op == 'read' then
  local ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
  local out = {redis.call('HGET', KEYS[2], ' limit') or ''}
  for i = 1, #ids, 2 do
    out[#out + 1] = ids[i]
    out[#out + 1] = ids[i + 1]
    out[#out + 1] = redis.call('HGET', KEYS[2], ids[i]) or ''
  end
  return out
end
return redis.error_reply('log.lua: unknown operation ' .. tostring(op))
