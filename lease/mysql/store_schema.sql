-- store_schema.sql: the tables of entries and logs (backend.Entries and
-- backend.Logs), created by the first call that needs them if either is
-- missing. They are named after the lease table: {{entries}} is
-- <table>_entries and {{log}} is <table>_log, in its database. Names and
-- IDs are VARBINARY: they compare and sort bytewise, as Go's strings do.
CREATE TABLE IF NOT EXISTS {{entries}} (
    space      VARBINARY(255) NOT NULL,
    name       VARBINARY(255) NOT NULL,
    -- Entry.Version: a Put with a higher one replaces the row
    version    BIGINT         NOT NULL,
    data       MEDIUMBLOB     NOT NULL,
    -- Entry.TTL in µs (rounded up); 0: no expiry
    ttl_us     BIGINT         NOT NULL DEFAULT 0,
    -- end of the entry on the database's clock (UTC_TIMESTAMP(6)); NULL:
    -- never
    expires_at DATETIME(6)    NULL,
    -- random token of the Put that last wrote the row (see put.sql)
    wtoken     VARBINARY(32)  NOT NULL DEFAULT '',
    PRIMARY KEY (space, name),
    -- the expired rows of a space, which every Put in that space deletes
    KEY {{entries_expiry}} (space, expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {{log}} (
    log   VARBINARY(255) NOT NULL,
    id    VARBINARY(255) NOT NULL,
    -- Record.At in milliseconds since 1970 (UTC)
    at_ms BIGINT         NOT NULL,
    data  MEDIUMBLOB     NOT NULL,
    PRIMARY KEY (log, id),
    -- a log newest first (Log) and its records beyond the limit (Append)
    KEY {{log_at}} (log, at_ms, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
