-- extend.sql: reset the TTL of a lease that is still ours and unexpired.
-- $1 key, $2 token, $3 TTL in µs. Zero rows: the lease is lost.
UPDATE {{table}}
SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond',
    ttl_us = $3::bigint
WHERE key = $1::text AND token = $2::text AND expires_at > clock_timestamp()
