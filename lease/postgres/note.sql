-- note.sql: store a note unless one of the same or a higher version is
-- stored. $1 key, $2 version, $3 note.
INSERT INTO {{table}} AS l (key, note_version, note) VALUES ($1::text, $2::bigint, $3::text)
ON CONFLICT (key) DO UPDATE
SET note_version = excluded.note_version, note = excluded.note
WHERE l.note_version < excluded.note_version
