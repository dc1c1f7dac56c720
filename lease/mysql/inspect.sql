-- inspect.sql: the state of one key. ? key. No row: never used.
-- holder (owner while held, else ''), time left in µs, done_epoch, fence,
-- note, note_version.
SELECT IF(token IS NOT NULL AND expires_at > UTC_TIMESTAMP(6), owner, ''),
       IF(token IS NOT NULL AND expires_at > UTC_TIMESTAMP(6),
          TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 0),
       done_epoch, fence, note, note_version
FROM {{table}}
WHERE k = ?
