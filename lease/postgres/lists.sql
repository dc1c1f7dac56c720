-- lists.sql: the live entries of several spaces (the spaces a heartbeat's
-- round reads), by space, then name (bytewise). $1 the spaces.
SELECT space, name, version, data, ttl_us
FROM {{entries}}
WHERE space = ANY($1::text[])
  AND (expires_at IS NULL OR expires_at > clock_timestamp())
ORDER BY space COLLATE "C", name COLLATE "C"
