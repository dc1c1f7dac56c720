-- acquire.sql: one attempt at each lease of a batch, in one statement.
-- $1 keys (distinct, sorted: concurrent batches lock rows in one order),
-- $2 tokens, $3 owners, $4 TTLs in µs, $5 epochs (0: none), $6 and $7 the
-- holder token and row version (xmin) this client has seen unchanged for
-- at least that holder's TTL on its own monotonic clock ('' if none).
--
-- A key is granted when its row is free and its completed epoch is below
-- the requested one. Free means: no token (released, completed, never
-- held), or already ours (a retry of an attempt whose reply was lost), or
-- {{takeover}}. The server's clock plays no part in it: a holder that
-- renews writes a new row version (xmin changes on every UPDATE), so a
-- version seen unchanged for a TTL is one whose holder's validity, counted
-- from before the write, has ended. A grant sets the token and expiry and
-- raises the fence by one.
--
-- One row per request, in request order: granted, fence, done_epoch, and
-- for a refusal the row as it was before the statement (the snapshot that
-- every part of a statement with a data-modifying CTE reads): its owner,
-- time left on the server's clock in µs (0 when not held or expired there;
-- a report, not a rule), whether it carried a token, the token, the row
-- version and the holder's TTL in µs.
WITH req AS (
    SELECT r.key, r.token, r.owner, r.ttl_us, r.epoch, r.seen_token, r.seen_xmin, r.i
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[])
         WITH ORDINALITY AS r(key, token, owner, ttl_us, epoch, seen_token, seen_xmin, i)
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
    WHERE (l.token IS NULL OR l.token = excluded.token OR {{takeover}})
      AND (excluded.epoch <= 0 OR l.done_epoch < excluded.epoch)
    RETURNING l.key, l.fence, l.done_epoch
)
SELECT won.key IS NOT NULL,
       coalesce(won.fence, cur.fence, 0),
       coalesce(won.done_epoch, cur.done_epoch, 0),
       coalesce(cur.owner, ''),
       CASE WHEN cur.token IS NOT NULL AND cur.expires_at > clock_timestamp()
            THEN (extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000)::bigint
            ELSE 0 END,
       cur.token IS NOT NULL,
       coalesce(cur.token, ''),
       coalesce(cur.xmin::text, ''),
       coalesce(cur.ttl_us, 0)
FROM req
LEFT JOIN won ON won.key = req.key
LEFT JOIN {{table}} cur ON cur.key = req.key
ORDER BY req.i
