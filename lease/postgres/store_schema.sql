-- store_schema.sql: the tables of entries and logs (backend.Entries and
-- backend.Logs), created together, in one transaction, by the first call
-- that needs them if either is missing. They are named after the lease
-- table: {{entries}} is <table>_entries and {{log}} is <table>_log, in its
-- schema (a lease table name longer than 55 bytes is cut to make room for
-- the suffix). {{logged}} is empty (LOGGED tables) except in tests.
-- Names and IDs sort bytewise (COLLATE "C"), as Go's strings do.
CREATE {{logged}} TABLE IF NOT EXISTS {{entries}} (
    space      text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    -- Entry.Version: a Put with a higher one replaces the row
    version    bigint      NOT NULL,
    data       bytea       NOT NULL,
    -- Entry.TTL in µs (rounded up); 0: no expiry
    ttl_us     bigint      NOT NULL DEFAULT 0,
    -- end of the entry on the database's clock (clock_timestamp());
    -- NULL: never
    expires_at timestamptz,
    PRIMARY KEY (space, name)
);
-- The expired rows of a space, which every Put in that space deletes.
CREATE INDEX IF NOT EXISTS {{entries_expiry}} ON {{entries}} (space, expires_at)
    WHERE expires_at IS NOT NULL;
CREATE {{logged}} TABLE IF NOT EXISTS {{log}} (
    log  text COLLATE "C" NOT NULL,
    id   text COLLATE "C" NOT NULL,
    -- Record.At, to the millisecond
    at   timestamptz NOT NULL,
    data bytea       NOT NULL,
    PRIMARY KEY (log, id)
);
-- A log newest first (Log) and its records beyond the limit (Append).
CREATE INDEX IF NOT EXISTS {{log_at}} ON {{log}} (log, at DESC, id DESC);
