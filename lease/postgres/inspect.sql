-- inspect.sql: the state of one key. $1 key. No row: never used.
-- holder (owner while held, else ''), time left in µs, done_epoch, fence,
-- note, note_version.
SELECT CASE WHEN token IS NOT NULL AND expires_at > clock_timestamp() THEN owner ELSE '' END,
       CASE WHEN token IS NOT NULL AND expires_at > clock_timestamp()
            THEN (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint
            ELSE 0 END,
       done_epoch, fence, note, note_version
FROM {{table}}
WHERE key = $1::text
