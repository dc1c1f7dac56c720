-- check.sql: does the table exist, has it the columns the statements use,
-- and may the role use it? $1 the table name as given (schema-qualified or
-- not) in its quoted form. One row if the table exists: the columns
-- missing and the privileges missing (comma-separated, NULL if none).
SELECT (SELECT string_agg(c, ', ' ORDER BY c)
          FROM unnest(ARRAY['key', 'token', 'owner', 'epoch', 'ttl_us', 'expires_at',
                            'fence', 'done_epoch', 'note', 'note_version']) AS c
         WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                            WHERE a.attrelid = to_regclass($1::text) AND a.attname = c
                              AND a.attnum > 0 AND NOT a.attisdropped)),
       (SELECT string_agg(p, ', ' ORDER BY p)
          FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE']) AS p
         WHERE NOT has_table_privilege(to_regclass($1::text), p))
WHERE to_regclass($1::text) IS NOT NULL
