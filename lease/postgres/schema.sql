-- schema.sql: the lease table, created by Open if missing. One row per key;
-- rows are never deleted (the fence counter and the completed epoch live
-- in them). {{table}} is the quoted table name; {{logged}} is empty (a
-- LOGGED table: commits survive a crash) except in tests.
CREATE {{logged}} TABLE IF NOT EXISTS {{table}} (
    key          text        PRIMARY KEY,
    -- token of the current acquisition; NULL when released or never held
    token        text,
    -- Request.Owner of the last acquisition (reported while held)
    owner        text        NOT NULL DEFAULT '',
    -- Request.Epoch and TTL (µs) of the last acquisition or extension
    epoch        bigint      NOT NULL DEFAULT 0,
    ttl_us       bigint      NOT NULL DEFAULT 0,
    -- end of the lease on the database's clock (clock_timestamp()): for
    -- reports only; takeover is counted on the contender's clock from the
    -- row version (xmin) it saw (acquire.sql)
    expires_at   timestamptz NOT NULL DEFAULT '-infinity',
    -- fencing token of the last acquisition: +1 per grant, never reset
    fence        bigint      NOT NULL DEFAULT 0,
    -- highest completed epoch
    done_epoch   bigint      NOT NULL DEFAULT 0,
    -- run record for `leasecron status` (SetNote); -1: none
    note         text        NOT NULL DEFAULT '',
    note_version bigint      NOT NULL DEFAULT -1
)
