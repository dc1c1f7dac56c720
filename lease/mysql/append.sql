-- append.sql: add a record to a log unless its ID is there or it is older
-- than the log's newest limit records. ? log, id, at (ms), data, log,
-- limit, at, id, limit. A repeated ID changes nothing.
INSERT INTO {{log}} (log, id, at_ms, data)
SELECT ?, ?, ?, ? FROM DUAL
WHERE (SELECT COUNT(*)
         FROM (SELECT at_ms, id FROM {{log}} WHERE log = ?
                ORDER BY at_ms DESC, id DESC LIMIT ?) AS newest
        WHERE (newest.at_ms, newest.id) > (?, ?)) < ?
ON DUPLICATE KEY UPDATE id = id
