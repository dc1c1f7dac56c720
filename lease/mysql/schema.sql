-- schema.sql: the lease table, created by Open if missing. One row per key;
-- rows are never deleted (the fence counter and the completed epoch live
-- in them). {{table}} is the quoted table name. InnoDB (transactional,
-- crash-safe with innodb_flush_log_at_trx_commit=1), utf8mb4. Keys and
-- tokens are VARBINARY: compared and sorted bytewise, as Go's strings are
-- (the lock order of a batch is its keys' order in Go), with no
-- collation's case folding or trailing-space padding.
CREATE TABLE IF NOT EXISTS {{table}} (
    k            VARBINARY(768)  NOT NULL,
    -- token of the current acquisition; NULL when released or never held
    token        VARBINARY(32)   NULL,
    -- Request.Owner of the last acquisition (reported while held)
    owner        TEXT            NOT NULL,
    -- Request.Epoch and TTL (µs) of the last acquisition or extension
    epoch        BIGINT          NOT NULL DEFAULT 0,
    ttl_us       BIGINT          NOT NULL DEFAULT 0,
    -- end of the lease on the database's clock (UTC_TIMESTAMP(6)); a
    -- report (time left): takeover is counted on the contender's clock
    expires_at   DATETIME(6)     NOT NULL DEFAULT '1000-01-01 00:00:00',
    -- fencing token of the last acquisition: +1 per grant, never reset
    fence        BIGINT          NOT NULL DEFAULT 0,
    -- +1 on every grant and extension: what a contender watches
    version      BIGINT          NOT NULL DEFAULT 0,
    -- the takeover claim of the last INSERT of the key (token/version a
    -- contender saw unchanged for the holder's TTL); only read within
    -- the statement that sends it
    claim        VARBINARY(64)   NOT NULL DEFAULT '',
    -- highest completed epoch
    done_epoch   BIGINT          NOT NULL DEFAULT 0,
    -- run record for `leasecron status` (SetNote); -1: none
    note         MEDIUMTEXT      NOT NULL,
    note_version BIGINT          NOT NULL DEFAULT -1,
    PRIMARY KEY (k)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
