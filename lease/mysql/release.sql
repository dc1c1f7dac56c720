-- release.sql: give a lease up if it is still ours (compare-and-free).
-- ? key, token. The fence and the completed epoch stay.
UPDATE {{table}}
SET token = NULL, expires_at = UTC_TIMESTAMP(6)
WHERE k = ? AND token = ?
