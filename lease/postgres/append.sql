-- append.sql: add a record to a log and drop the records beyond the
-- newest limit, in one statement. $1 log, $2 id, $3 at (whole
-- milliseconds), $4 data, $5 limit.
--
-- Every part of the statement reads the log as it was before it (one
-- snapshot), so the cut is computed over the old records plus the new
-- one: cut is the limit-th newest of them (by at, then id); the new record
-- is inserted only if it is not older than the cut (an old record
-- appended to a full log is dropped at once), and every old record older
-- than the cut is deleted. A record whose id is in the log already is not
-- inserted again (nor counted twice). Rows another statement has locked
-- are skipped by the delete (never waited for: no deadlock); concurrent
-- appenders, each blind to the other's new record, may leave a few
-- records more than limit, which the next Append drops.
WITH new AS (
    SELECT $2::text COLLATE "C" AS id, $3::timestamptz AS at
    WHERE NOT EXISTS (SELECT 1 FROM {{log}} WHERE log = $1::text AND id = $2::text)
), cut AS (
    SELECT r.at, r.id
    FROM ((SELECT at, id FROM {{log}} WHERE log = $1::text
            ORDER BY at DESC, id COLLATE "C" DESC LIMIT $5::int)
          UNION ALL
          SELECT at, id FROM new) AS r
    ORDER BY r.at DESC, r.id COLLATE "C" DESC
    OFFSET $5::int - 1 LIMIT 1
), ins AS (
    INSERT INTO {{log}} (log, id, at, data)
    SELECT $1::text, new.id, new.at, $4::bytea FROM new
    WHERE NOT EXISTS (SELECT 1 FROM cut
                       WHERE (new.at, new.id COLLATE "C") < (cut.at, cut.id COLLATE "C"))
    ON CONFLICT (log, id) DO NOTHING
)
DELETE FROM {{log}}
WHERE (log, id) IN (
    SELECT o.log, o.id FROM {{log}} o, cut
    WHERE o.log = $1::text AND (o.at, o.id COLLATE "C") < (cut.at, cut.id COLLATE "C")
    FOR UPDATE OF o SKIP LOCKED)
