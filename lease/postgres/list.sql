-- list.sql: the live entries of a space, by name (bytewise). $1 space.
SELECT name, version, data, ttl_us
FROM {{entries}}
WHERE space = $1::text
  AND (expires_at IS NULL OR expires_at > clock_timestamp())
ORDER BY name COLLATE "C"
