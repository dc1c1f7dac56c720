-- log.sql: the newest records of a log, newest first (by at, then id).
-- $1 log, $2 how many.
SELECT id, at, data
FROM {{log}}
WHERE log = $1::text
ORDER BY at DESC, id COLLATE "C" DESC
LIMIT $2::int
