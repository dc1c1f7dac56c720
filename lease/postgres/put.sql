-- put.sql: store an entry unless a live one of the same or a higher
-- version is stored, and delete up to 100 other expired entries of the
-- same space. $1 space, $2 name, $3 version, $4 data, $5 TTL in µs (0:
-- none).
--
-- The stored row is replaced when it expired on the database's clock or
-- its version is lower. The cleanup leaves the row being written alone
-- (one statement must not both delete and upsert a row) and skips rows
-- that another statement has locked: a Put waits only in its upsert, for
-- its own row, before it holds any other lock (PostgreSQL runs a
-- data-modifying WITH that the main query does not read after the main
-- query), so Puts never deadlock (TestPutCleanupNoDeadlock, whose negative
-- control, a cleanup that waits, does).
WITH expired AS (
    DELETE FROM {{entries}}
    WHERE (space, name) IN (
        SELECT space, name FROM {{entries}}
        WHERE space = $1::text AND expires_at <= clock_timestamp() AND name <> $2::text
        LIMIT 100
        FOR UPDATE SKIP LOCKED)
)
INSERT INTO {{entries}} AS e (space, name, version, data, ttl_us, expires_at)
VALUES ($1::text, $2::text, $3::bigint, $4::bytea, $5::bigint,
        CASE WHEN $5::bigint > 0 THEN clock_timestamp() + $5::bigint * interval '1 microsecond' END)
ON CONFLICT (space, name) DO UPDATE
SET version = excluded.version,
    data = excluded.data,
    ttl_us = excluded.ttl_us,
    expires_at = excluded.expires_at
WHERE e.expires_at <= clock_timestamp() OR e.version < excluded.version
