-- lists.sql: the live entries of several spaces (the spaces a heartbeat's
-- round reads), by space, then name (bytewise). {{spaces}} is replaced by
-- one ? per space.
SELECT space, name, version, data, ttl_us
FROM {{entries}}
WHERE space IN ({{spaces}})
  AND (expires_at IS NULL OR expires_at > UTC_TIMESTAMP(6))
ORDER BY space, name
