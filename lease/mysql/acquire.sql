-- acquire.sql: one attempt at each lease of a batch, in one statement.
-- {{rows}} is one row per request, (k, token, owner, epoch, ttl_us,
-- expires_at, fence, version, claim, note), in key order (distinct,
-- sorted bytewise: concurrent batches lock rows in one order, so they
-- wait for each other but never deadlock).
--
-- A key is granted when its row is free and its completed epoch is below
-- the requested one. Free means: no token (released, completed, never
-- held), or already ours (a retry of an attempt whose reply was lost), or
-- {{takeover}}. A grant sets the token, owner, epoch, TTL and expiry,
-- and raises the fence and the version by one.
--
-- MySQL evaluates the assignments of ON DUPLICATE KEY UPDATE from left to
-- right, each seeing the columns the previous ones set: the first decides
-- (the token becomes ours only on a grant; tokens are random), the others
-- follow it. The outcome is read back by row.sql.
INSERT INTO {{table}} (k, token, owner, epoch, ttl_us, expires_at, fence, version, claim, note)
VALUES {{rows}}
ON DUPLICATE KEY UPDATE
    token = IF((token IS NULL OR token = VALUES(token) OR {{takeover}})
               AND (VALUES(epoch) <= 0 OR done_epoch < VALUES(epoch)), VALUES(token), token),
    fence = IF(token <=> VALUES(token), fence + 1, fence),
    version = IF(token <=> VALUES(token), version + 1, version),
    owner = IF(token <=> VALUES(token), VALUES(owner), owner),
    epoch = IF(token <=> VALUES(token), VALUES(epoch), epoch),
    ttl_us = IF(token <=> VALUES(token), VALUES(ttl_us), ttl_us),
    expires_at = IF(token <=> VALUES(token), VALUES(expires_at), expires_at)
