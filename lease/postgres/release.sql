-- release.sql: give a lease up if it is still ours (compare-and-free).
-- $1 key, $2 token. The fence and the completed epoch stay.
UPDATE {{table}}
SET token = NULL, expires_at = clock_timestamp()
WHERE key = $1::text AND token = $2::text
