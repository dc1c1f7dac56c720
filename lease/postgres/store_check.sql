-- store_check.sql: does a table of entries or logs exist, has it the
-- columns the statements use, and may the role use it? $1 the quoted
-- table name, $2 the columns, $3 the privileges needed. One row if the
-- table exists: the columns missing and the privileges missing
-- (comma-separated, NULL if none).
SELECT (SELECT string_agg(c, ', ' ORDER BY c)
          FROM unnest($2::text[]) AS c
         WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                            WHERE a.attrelid = to_regclass($1::text) AND a.attname = c
                              AND a.attnum > 0 AND NOT a.attisdropped)),
       (SELECT string_agg(p, ', ' ORDER BY p)
          FROM unnest($3::text[]) AS p
         WHERE NOT has_table_privilege(to_regclass($1::text), p))
WHERE to_regclass($1::text) IS NOT NULL
