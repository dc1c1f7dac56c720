-- get.sql: one live entry. $1 space, $2 name. No row: none, or expired.
SELECT version, data, ttl_us
FROM {{entries}}
WHERE space = $1::text AND name = $2::text
  AND (expires_at IS NULL OR expires_at > clock_timestamp())
