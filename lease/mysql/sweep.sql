-- sweep.sql: delete up to 100 expired entries of a space, after a Put in
-- it, leaving the entry just written alone. ? space, name. A separate
-- statement, whose failure (a lock wait, a deadlock with another sweep)
-- is ignored: the next Put sweeps again.
DELETE FROM {{entries}}
WHERE space = ? AND expires_at <= UTC_TIMESTAMP(6) AND name <> ?
LIMIT 100
