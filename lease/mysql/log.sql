-- log.sql: the newest records of a log, newest first (by at, then id).
-- ? log, how many.
SELECT id, at_ms, data
FROM {{log}}
WHERE log = ?
ORDER BY at_ms DESC, id DESC
LIMIT ?
