-- complete.sql: mark an epoch completed and free the row, if the row still
-- carries our token (expired or not: nobody took it over). ? epoch, token,
-- token, key, token, epoch. Zero rows matched: the lease was lost (another
-- acquisition took the key) and the epoch is left open.
--
-- A row whose completed epoch already reaches the epoch also matches
-- (without being freed unless it is ours): a retried Complete whose first
-- attempt committed but lost its reply finds it so, and the epoch is done.
-- The assignments run left to right; token is set last, so the ones
-- before it see the old token.
UPDATE {{table}}
SET done_epoch = GREATEST(done_epoch, ?),
    expires_at = IF(token <=> ?, UTC_TIMESTAMP(6), expires_at),
    token = IF(token <=> ?, NULL, token)
WHERE k = ? AND (token = ? OR done_epoch >= ?)
