-- get.sql: one live entry. ? space, name. No row: none, or expired.
SELECT version, data, ttl_us
FROM {{entries}}
WHERE space = ? AND name = ?
  AND (expires_at IS NULL OR expires_at > UTC_TIMESTAMP(6))
