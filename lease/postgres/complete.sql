-- complete.sql: mark an epoch completed and free the row, if the row still
-- carries our token. $1 key, $2 token, $3 epoch. Zero rows: the lease was
-- lost (another acquisition took the key) and the epoch is left open.
--
-- A row whose completed epoch already reaches $3 also matches (without
-- being freed unless it is ours): a retried Complete whose first attempt
-- committed but lost its reply finds it so, and the epoch is done.
UPDATE {{table}}
SET done_epoch = greatest(done_epoch, $3::bigint),
    expires_at = CASE WHEN token = $2::text THEN clock_timestamp() ELSE expires_at END,
    token = CASE WHEN token = $2::text THEN NULL ELSE token END
WHERE key = $1::text AND (token = $2::text OR done_epoch >= $3::bigint)
