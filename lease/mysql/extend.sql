-- extend.sql: reset the TTL of a lease that is still ours. ? TTL in µs
-- (twice), key, token. Zero rows matched: the lease is lost (another
-- acquisition took the key, or it was released). Whether expires_at has
-- passed on the server's clock does not matter (it decides nothing, see
-- acquire.sql): while the row carries our token nobody else holds the
-- key, and the new version restarts every contender's count.
UPDATE {{table}}
SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    ttl_us = ?,
    version = version + 1
WHERE k = ? AND token = ?
