-- extend.sql: reset the TTL of a lease that is still ours. $1 key, $2
-- token, $3 TTL in µs. Zero rows: the lease is lost (another acquisition
-- took the key, or it was released). Whether expires_at has passed on the
-- server's clock does not matter (it decides nothing, see acquire.sql):
-- while the row carries our token nobody else holds the key, and the
-- write is a new row version, which restarts every contender's count.
UPDATE {{table}}
SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond',
    ttl_us = $3::bigint
WHERE key = $1::text AND token = $2::text
