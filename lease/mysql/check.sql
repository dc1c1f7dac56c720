-- check.sql: the columns of the table, if it exists. ? schema, table.
SELECT column_name FROM information_schema.columns
WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?
