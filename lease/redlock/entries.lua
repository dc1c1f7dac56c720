-- entries.lua: a space of entries (see store.go), on the server's clock.
-- KEYS[1] the space's hash: entry name -> value.
-- KEYS[2] its expiry index: a sorted set of the names stored with a TTL,
--         scored by the instant (server ms) the entry expires.
-- A value is "VERSION EXPIRY TTL DATA": VERSION is 20 decimal digits (the
-- int64 version plus 2^63, so that comparing the digits compares the
-- versions exactly: Lua numbers are doubles), EXPIRY the server-clock ms
-- at which the entry expires (0: never), TTL the TTL in ms it was stored
-- with (0: none), DATA the bytes.
-- ARGV[1] is the operation:
--   put NAME VERSION TTL DATA -> 1 stored, 0 a live entry of equal or
--                                higher version was kept
--   get NAME                  -> {VERSION, TTL, DATA}, or {} if absent or expired
--   list                      -> {NAME, VERSION, TTL, DATA, ...} of the live entries
--   beat NAME VERSION TTL DATA -> {put's reply, list's reply of the space
--                                KEYS[3..4], of KEYS[5..6], ...}: a
--                                heartbeat put in KEYS[1..2] and the spaces
--                                its host watches read, in one call
-- Expired entries count as absent everywhere; put and list delete the
-- expired ones (up to 1000 a call, the oldest first), get the one it met.
-- When every entry of a space has a TTL, both keys expire (PEXPIREAT) with
-- the last of them, so an abandoned space leaves nothing behind.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function parse(v)
  local a = string.find(v, ' ', 22, true)
  local b = string.find(v, ' ', a + 1, true)
  return string.sub(v, 1, 20), tonumber(string.sub(v, 22, a - 1)), string.sub(v, a + 1, b - 1), string.sub(v, b + 1)
end

local function live(exp)
  return exp == 0 or exp > now
end

-- newer reports whether version a is above version b (20 digits each).
local function newer(a, b)
  for i = 1, 20 do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return false
end

local function sweep(h, x)
  local gone = redis.call('ZRANGEBYSCORE', x, '-inf', string.format('%.0f', now), 'LIMIT', 0, 1000)
  if #gone > 0 then
    redis.call('HDEL', h, unpack(gone))
    redis.call('ZREM', x, unpack(gone))
  end
end

-- settle gives both keys the expiry of the last entry when every entry
-- has a TTL, and no expiry otherwise.
local function settle(h, x)
  local n = redis.call('HLEN', h)
  if n == 0 then
    return
  end
  if redis.call('ZCARD', x) == n then
    local last = redis.call('ZRANGE', x, -1, -1, 'WITHSCORES')
    local at = string.format('%.0f', tonumber(last[2]))
    redis.call('PEXPIREAT', h, at)
    redis.call('PEXPIREAT', x, at)
  else
    redis.call('PERSIST', h)
    redis.call('PERSIST', x)
  end
end

-- put stores ARGV[2..5] (name, version, TTL, data) in the space h, x.
local function put(h, x)
  local name, ver, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])
  sweep(h, x)
  local cur = redis.call('HGET', h, name)
  if cur then
    local cver, cexp = parse(cur)
    if live(cexp) and not newer(ver, cver) then
      return 0
    end
  end
  local exp = '0'
  if ttl > 0 then
    exp = string.format('%.0f', now + ttl)
    redis.call('ZADD', x, exp, name)
  else
    redis.call('ZREM', x, name)
  end
  redis.call('HSET', h, name, ver .. ' ' .. exp .. ' ' .. ARGV[4] .. ' ' .. ARGV[5])
  settle(h, x)
  return 1
end

-- list returns the live entries of the space h, x.
local function list(h, x)
  sweep(h, x)
  local all = redis.call('HGETALL', h)
  local out = {}
  for i = 1, #all, 2 do
    local ver, exp, ttl, data = parse(all[i + 1])
    if live(exp) then
      out[#out + 1] = all[i]
      out[#out + 1] = ver
      out[#out + 1] = ttl
      out[#out + 1] = data
    end
  end
  return out
end

local op = ARGV[1]
if op == 'put' then
  return put(KEYS[1], KEYS[2])
elseif op == 'get' then
  local cur = redis.call('HGET', KEYS[1], ARGV[2])
  if not cur then
    return {}
  end
  local ver, exp, ttl, data = parse(cur)
  if not live(exp) then
    redis.call('HDEL', KEYS[1], ARGV[2])
    redis.call('ZREM', KEYS[2], ARGV[2])
    return {}
  end
  return {ver, ttl, data}
elseif op == 'list' then
  return list(KEYS[1], KEYS[2])
elseif op == 'beat' then
  local out = {put(KEYS[1], KEYS[2])}
  for i = 3, #KEYS - 1, 2 do
    out[#out + 1] = list(KEYS[i], KEYS[i + 1])
  end
  return out
end
return redis.error_reply('entries.lua: unknown operation ' .. tostring(op))
