-- inspect.lua: read the whole state of a lease.
-- KEYS[1] lock, KEYS[2] fence, KEYS[3] completed epoch, KEYS[4] note
-- Returns {holder_value, pttl, fence, done_epoch, note_version, note}
local cur = redis.call('GET', KEYS[1]) or ''
local pttl = redis.call('PTTL', KEYS[1])
local v = redis.call('HGET', KEYS[4], 'v') or '-1'
local n = redis.call('HGET', KEYS[4], 'n') or ''
return {cur, pttl, redis.call('GET', KEYS[2]) or '0', redis.call('GET', KEYS[3]) or '0', v, n}
