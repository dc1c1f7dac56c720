-- list.sql: the live entries of a space, by name (bytewise). ? space.
SELECT name, version, data, ttl_us
FROM {{entries}}
WHERE space = ?
  AND (expires_at IS NULL OR expires_at > UTC_TIMESTAMP(6))
ORDER BY name
