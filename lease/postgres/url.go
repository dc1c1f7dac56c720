package postgres

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// URLOptions are the query parameters a postgres URL may carry, in the
// order messages list them. They are the libpq connection parameters that
// make sense for a lease table: TLS (sslmode and the certificate files,
// sslsni, sslnegotiation), authentication hardening (channel_binding,
// require_auth), connect_timeout, application_name, target_session_attrs
// (for a multi-host URL: read-write finds the primary) and options
// (server settings such as "-c lock_timeout=1s"). Everything else is
// refused: host, port, user, password and dbname belong in the URL itself
// (the password may also come from password_file); search_path and other
// server settings are not needed (the table may be schema-qualified);
// service, passfile and sslpassword would take credentials from elsewhere.
var URLOptions = []string{
	"sslmode", "sslrootcert", "sslcert", "sslkey", "sslsni", "sslnegotiation",
	"channel_binding", "require_auth",
	"connect_timeout", "application_name", "target_session_attrs", "options",
}

// SSLModes are libpq's sslmode values. Without sslmode, libpq and pgx use
// "prefer", which neither requires TLS nor verifies the server.
var SSLModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// targetSessionAttrs are the values pgx accepts for target_session_attrs.
var targetSessionAttrs = []string{"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}

const wantURL = "want postgres://user@host:5432/dbname?sslmode=verify-full"

// CheckURL reports what is wrong with a postgres URL without connecting:
// the scheme is postgres:// or postgresql://, there is at least one host
// (several, comma-separated, for failover with target_session_attrs), each
// port is a number from 1 to 65535, sslmode is one of SSLModes, and every
// query parameter is one of URLOptions. Keyword/value strings ("host=db1
// dbname=ops") are refused: the config takes a URL. It then lets pgconn
// parse the URL (which also reads sslrootcert, sslcert and sslkey if given,
// and the PG* environment variables, as the backend will when it opens).
//
// The error never contains the URL's password.
func CheckURL(raw string) error {
	if err := checkURL(raw); err != nil {
		return err
	}
	allowed := append([]string{"host", "port", "user", "password", "dbname"}, URLOptions...)
	_, err := pgconn.ParseConfigWithOptions(raw, pgconn.ParseConfigOptions{ConnStringAllowedKeys: allowed})
	if err != nil {
		return errors.New(scrub(parseErrorText(err), raw))
	}
	return nil
}

// checkURL does the checks CheckURL does itself, with messages that quote
// nothing of raw but option names and values that carry no secret.
func checkURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("empty URL (" + wantURL + ")")
	}
	u, err := url.Parse(raw)
	if err != nil {
		if !strings.Contains(raw, "://") && strings.Contains(raw, "=") {
			return errors.New("a keyword/value string (host=... dbname=...) is not accepted: use a URL (" + wantURL + ")")
		}
		return errors.New("not a valid URL (" + wantURL + ")")
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
	case "":
		if strings.Contains(raw, "=") {
			return errors.New("a keyword/value string (host=... dbname=...) is not accepted: use a URL (" + wantURL + ")")
		}
		return errors.New("missing scheme (" + wantURL + ")")
	default:
		return fmt.Errorf("unsupported scheme %q (use postgres:// or postgresql://)", u.Scheme)
	}
	if !strings.HasPrefix(raw, u.Scheme+":") {
		return errors.New("write the scheme in lower case: postgres:// or postgresql://")
	}
	if u.Opaque != "" || u.Host == "" {
		return errors.New("missing host (" + wantURL + "); a Unix socket is not supported")
	}
	for _, hp := range strings.Split(u.Host, ",") {
		if err := checkHostPort(hp); err != nil {
			return err
		}
	}
	if u.User != nil && u.User.Username() == "" {
		if _, ok := u.User.Password(); ok {
			return errors.New("a password without a user name")
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errors.New("bad query string (" + wantURL + ")")
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := q[k]
		switch {
		case strings.Contains(strings.ToLower(k), "pass"):
			return fmt.Errorf("option %s is not accepted: put the password in the URL (postgres://user:password@host/db) or in password_file", k)
		case !slices.Contains(URLOptions, k):
			return fmt.Errorf("unknown option %q (allowed: %s)", k, strings.Join(URLOptions, ", "))
		case len(v) > 1:
			return fmt.Errorf("option %s given %d times", k, len(v))
		}
	}
	if m, ok := q["sslmode"]; ok && !slices.Contains(SSLModes, m[0]) {
		return fmt.Errorf("bad sslmode %q (one of %s)", m[0], strings.Join(SSLModes, ", "))
	}
	if t, ok := q["connect_timeout"]; ok {
		if n, err := strconv.Atoi(t[0]); err != nil || n < 0 {
			return fmt.Errorf("bad connect_timeout %q: want whole seconds, such as 5", t[0])
		}
	}
	if a, ok := q["target_session_attrs"]; ok && !slices.Contains(targetSessionAttrs, a[0]) {
		return fmt.Errorf("bad target_session_attrs %q (one of %s)", a[0], strings.Join(targetSessionAttrs, ", "))
	}
	return nil
}

// checkHostPort checks one host[:port] of a URL's host list.
func checkHostPort(hp string) error {
	host, port := hp, ""
	if strings.HasPrefix(hp, "[") {
		end := strings.Index(hp, "]")
		if end < 0 {
			return errors.New("bad host: unclosed '['")
		}
		host, port = hp[1:end], strings.TrimPrefix(hp[end+1:], ":")
		if rest := hp[end+1:]; rest != "" && !strings.HasPrefix(rest, ":") {
			return errors.New("bad host: text after ']'")
		}
		if net.ParseIP(host) == nil {
			return errors.New("bad host: not an IPv6 address in brackets")
		}
	} else if i := strings.LastIndex(hp, ":"); i >= 0 {
		host, port = hp[:i], hp[i+1:]
		if strings.Contains(host, ":") {
			return errors.New("bad host: put an IPv6 address in brackets, such as [::1]:5432")
		}
		if port == "" {
			return errors.New("empty port")
		}
	}
	if host == "" {
		return errors.New("missing host (" + wantURL + ")")
	}
	if port != "" {
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("bad port %q: want a number from 1 to 65535", port)
		}
	}
	return nil
}

// parseErrorText is the part of a pgconn parse error after the quoted
// connection string.
func parseErrorText(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		s := pe.Error()
		if i := strings.LastIndex(s, "`: "); i >= 0 {
			return s[i+3:]
		}
	}
	return err.Error()
}

// scrub removes raw's password from msg, should a library have quoted it.
func scrub(msg, raw string) string {
	for _, pw := range passwords(raw) {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// passwords are the passwords that raw may carry: the URL's, and any
// password-like parameter's.
func passwords(raw string) []string {
	var pws []string
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			pws = append(pws, pw)
		}
	}
	for k, vs := range u.Query() {
		if strings.Contains(strings.ToLower(k), "pass") {
			for _, v := range vs {
				if v != "" {
					pws = append(pws, v)
				}
			}
		}
	}
	return pws
}

// dsnPassword matches a password in a keyword/value string.
var dsnPassword = regexp.MustCompile(`(?i)(\w*pass\w*\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)

// Redact returns raw with its password, and the value of every query
// parameter whose name contains "pass", replaced by "xxxxx", safe to log
// (like lease.Redact). In a keyword/value string, password=... is
// replaced; other strings that are not URLs with a host part lose
// everything up to the last '@', or else everything after the first ':'.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Scheme == "" || (u.User == nil && strings.Contains(raw, "@")) {
		s := dsnPassword.ReplaceAllString(raw, "${1}xxxxx")
		if i := strings.LastIndex(s, "@"); i >= 0 {
			return "xxxxx@" + s[i+1:]
		}
		if before, _, ok := strings.Cut(s, ":"); ok {
			return before + ":xxxxx" // "user:password", a port or a password: cannot tell
		}
		return s
	}
	q, redacted := u.Query(), false
	for k := range q {
		if strings.Contains(strings.ToLower(k), "pass") {
			q[k], redacted = []string{"xxxxx"}, true
		}
	}
	if redacted {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
