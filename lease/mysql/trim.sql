-- trim.sql: delete the records of a log older than its limit-th newest.
-- ? log, limit - 1, log.
DELETE l FROM {{log}} AS l
JOIN (SELECT at_ms, id FROM {{log}} WHERE log = ?
       ORDER BY at_ms DESC, id DESC LIMIT 1 OFFSET ?) AS cut
  ON l.log = ? AND (l.at_ms, l.id) < (cut.at_ms, cut.id)
