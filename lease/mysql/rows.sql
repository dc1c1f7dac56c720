-- rows.sql: the state of the keys of a batch after acquire.sql. {{keys}}
-- is the list of keys. Per key: key, token ('' if none), fence,
-- done_epoch, owner, time left on the database's clock in µs (0 when not
-- held or expired there: a report, not a rule), version, TTL in µs.
SELECT k, COALESCE(token, ''), fence, done_epoch, owner,
       IF(token IS NOT NULL AND expires_at > UTC_TIMESTAMP(6),
          TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 0),
       version, ttl_us
FROM {{table}}
WHERE k IN ({{keys}})
