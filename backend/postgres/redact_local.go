package postgres

import (
	"net/url"
	"strings"
)

// This file is temporary: url.go (branch config) brings CheckURL and
// Redact (and its own unexported scrub and passwords); once merged,
// redactServer can become Redact, passwordOf/scrubSecret its scrub, and
// Open can start with CheckURL. The names here do not clash with it.

// redactServer returns the URL with its password (in the user info or a
// password query parameter) replaced by "xxxxx".
func redactServer(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres server (unparseable URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// passwordOf returns the password of a URL ("" if none), to scrub it from
// error texts that might quote it.
func passwordOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			return pw
		}
	}
	return u.Query().Get("password")
}

// scrubSecret replaces every occurrence of secret in s.
func scrubSecret(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "xxxxx")
}
