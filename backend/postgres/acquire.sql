-- acquire.sql: one attempt at each lease of a batch, in one statement.
-- $1 keys (distinct, sorted: concurrent batches lock rows in one order),
-- $2 tokens, $3 owners, $4 TTLs in µs, $5 epochs (0: none).
--
-- A key is granted when its row is free (no token, or expired on the
-- database's clock, or already ours: a retry of an attempt whose reply was
-- lost) and its completed epoch is below the requested one. A grant sets
-- the token and expiry and raises the fence by one.
--
-- One row per request, in request order: granted, fence, done_epoch, and
-- for a refusal the row as it was before the statement (the snapshot that
-- every part of a statement with a data-modifying CTE reads): its owner
-- and time left in µs, 0 when it was not held.
WITH req AS (
    SELECT r.key, r.token, r.owner, r.ttl_us, r.epoch, r.i
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])
         WITH ORDINALITY AS r(key, token, owner, ttl_us, epoch, i)
), won AS (
    INSERT INTO {{table}} AS l (key, token, owner, epoch, ttl_us, expires_at, fence)
    SELECT key, token, owner, epoch, ttl_us,
           clock_timestamp() + ttl_us * interval '1 microsecond', 1
    FROM req
    ORDER BY key
    ON CONFLICT (key) DO UPDATE
    SET token = excluded.token,
        owner = excluded.owner,
        epoch = excluded.epoch,
        ttl_us = excluded.ttl_us,
        expires_at = clock_timestamp() + excluded.ttl_us * interval '1 microsecond',
        fence = l.fence + 1
    WHERE (l.token IS NULL OR l.expires_at <= clock_timestamp() OR l.token = excluded.token)
      AND (excluded.epoch <= 0 OR l.done_epoch < excluded.epoch)
    RETURNING l.key, l.fence, l.done_epoch
)
SELECT won.key IS NOT NULL,
       coalesce(won.fence, cur.fence, 0),
       coalesce(won.done_epoch, cur.done_epoch, 0),
       coalesce(cur.owner, ''),
       CASE WHEN cur.token IS NOT NULL AND cur.expires_at > clock_timestamp()
            THEN (extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000)::bigint
            ELSE 0 END
FROM req
LEFT JOIN won ON won.key = req.key
LEFT JOIN {{table}} cur ON cur.key = req.key
ORDER BY req.i
