-- complete.sql: mark an epoch completed, and release the lease if it is
-- still ours. The mark is written whether or not the lease is still ours:
-- it is only sent after the epoch's work finished. $1 key, $2 token,
-- $3 epoch.
INSERT INTO {{table}} AS l (key, done_epoch) VALUES ($1::text, $3::bigint)
ON CONFLICT (key) DO UPDATE
SET done_epoch = greatest(l.done_epoch, excluded.done_epoch),
    expires_at = CASE WHEN l.token = $2::text THEN clock_timestamp() ELSE l.expires_at END,
    token = CASE WHEN l.token = $2::text THEN NULL ELSE l.token END
