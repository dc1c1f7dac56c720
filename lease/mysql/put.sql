-- put.sql: store an entry unless a live one of the same or a higher
-- version is stored. ? space, name, version, data, TTL in µs, TTL in µs
-- (0: none), the Put's random token.
--
-- The stored row is replaced when it expired on the database's clock or
-- its version is lower. The first assignment decides (the row takes this
-- Put's token only when it is replaced), the others follow it: MySQL runs
-- the assignments of ON DUPLICATE KEY UPDATE from left to right.
INSERT INTO {{entries}} (space, name, version, data, ttl_us, expires_at, wtoken)
VALUES (?, ?, ?, ?, ?, IF(? > 0, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, NULL), ?)
ON DUPLICATE KEY UPDATE
    wtoken = IF(expires_at <= UTC_TIMESTAMP(6) OR version < VALUES(version), VALUES(wtoken), wtoken),
    version = IF(wtoken <=> VALUES(wtoken), VALUES(version), version),
    data = IF(wtoken <=> VALUES(wtoken), VALUES(data), data),
    ttl_us = IF(wtoken <=> VALUES(wtoken), VALUES(ttl_us), ttl_us),
    expires_at = IF(wtoken <=> VALUES(wtoken), VALUES(expires_at), expires_at)
