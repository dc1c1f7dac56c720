-- note.sql: store a note unless one of the same or a higher version is
-- stored. ? key, version, note. note is set before note_version, so its
-- condition sees the old version.
INSERT INTO {{table}} (k, note_version, note, owner) VALUES (?, ?, ?, '')
ON DUPLICATE KEY UPDATE
    note = IF(note_version < VALUES(note_version), VALUES(note), note),
    note_version = GREATEST(note_version, VALUES(note_version))
