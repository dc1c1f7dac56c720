package mysql

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	driver "github.com/go-sql-driver/mysql"
)

// DSNOptions are the go-sql-driver/mysql parameters a DSN may carry: TLS
// (tls: true, skip-verify, preferred or a registered name), the dial and
// I/O timeouts, authentication (serverPubKey, allowCleartextPasswords for
// PAM or LDAP over TLS, allowNativePasswords), rejectReadOnly (after a
// failover, a connection to a demoted read-only primary is dropped),
// maxAllowedPacket, connectionAttributes, and parseTime, loc, charset,
// collation, interpolateParams, clientFoundRows and checkConnLiveness,
// which are accepted but overridden (see ForcedDSN). Everything else
// driver-side is refused (allowAllFiles, multiStatements,
// allowOldPasswords, ... : nothing leasecron needs and some are unsafe).
var DSNOptions = []string{
	"tls", "timeout", "readTimeout", "writeTimeout",
	"serverPubKey", "allowCleartextPasswords", "allowNativePasswords", "allowFallbackToPlaintext",
	"rejectReadOnly", "maxAllowedPacket", "connectionAttributes",
	"parseTime", "loc", "charset", "collation", "interpolateParams", "clientFoundRows", "checkConnLiveness",
}

// SessionVariables are the server variables a DSN may set for the
// backend's sessions (go-sql-driver/mysql sends any other parameter as SET
// name=value on every new connection): the isolation level
// (transaction_isolation, or tx_isolation on MariaDB before 11.1; the
// statements are correct under REPEATABLE READ and READ COMMITTED alike),
// the lock wait bounds and the statement time bounds.
var SessionVariables = []string{
	"transaction_isolation", "tx_isolation", "innodb_lock_wait_timeout", "lock_wait_timeout",
	"max_statement_time", "max_execution_time", "wait_timeout",
}

// ForcedDSN lists what the backend sets whatever the DSN says, and why:
// parseTime off (the backend reads times as microsecond counts computed by
// the server, never as DATETIME values, so no time zone can shift them),
// charset utf8mb4 with utf8mb4_bin (every byte of a UTF-8 key or owner is
// kept), interpolateParams on (one round trip per statement instead of
// prepare, execute and close; the values are escaped for utf8mb4, and a
// 10,000-key batch does not hit the 65,535-placeholder limit of prepared
// statements), clientFoundRows on (an UPDATE reports the rows it matched,
// which is how a lost lease is told from a kept one) and
// checkConnLiveness on.
const ForcedDSN = "parseTime=false, charset=utf8mb4 collation=utf8mb4_bin, interpolateParams=true, clientFoundRows=true, checkConnLiveness=true"

const wantDSN = `want user@tcp(host:3306)/dbname?tls=true`

// CheckDSN reports what is wrong with a go-sql-driver/mysql DSN without
// connecting: it parses, names a database, uses tcp (or unix) with a port
// from 1 to 65535, and every parameter is one of DSNOptions or
// SessionVariables. The error never contains the DSN's password.
func CheckDSN(dsn string) error {
	_, err := parseDSN(dsn)
	return err
}

// parseDSN checks dsn (see CheckDSN) and returns the driver's config with
// ForcedDSN applied.
func parseDSN(dsn string) (*driver.Config, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("empty DSN: %s", wantDSN)
	}
	if strings.Contains(dsn, "://") {
		return nil, fmt.Errorf("%s: a URL, not a DSN: %s", Redact(dsn), wantDSN)
	}
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %s (%s)", Redact(dsn), scrub(err.Error(), dsn), wantDSN)
	}
	if _, q, ok := strings.Cut(dsnTail(dsn), "?"); ok {
		for kv := range strings.SplitSeq(q, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if k != "" && !slices.Contains(DSNOptions, k) && !slices.Contains(SessionVariables, k) {
				return nil, fmt.Errorf("%s: unknown or unsupported parameter %q (want one of %s, or a session variable of %s)",
					Redact(dsn), k, strings.Join(DSNOptions, ", "), strings.Join(SessionVariables, ", "))
			}
		}
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%s: no database name: %s", Redact(dsn), wantDSN)
	}
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6":
		_, port, err := net.SplitHostPort(cfg.Addr)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%s: address %q: want host:port with a port from 1 to 65535", Redact(dsn), cfg.Addr)
		}
	case "unix":
	default:
		return nil, fmt.Errorf("%s: network %q: want tcp or unix", Redact(dsn), cfg.Net)
	}
	cfg.ParseTime = false
	cfg.InterpolateParams = true
	cfg.ClientFoundRows = true
	cfg.CheckConnLiveness = true
	cfg.MultiStatements = false
	cfg.AllowAllFiles = false
	cfg.Collation = ""
	if err := cfg.Apply(driver.Charset("utf8mb4", "utf8mb4_bin")); err != nil {
		return nil, fmt.Errorf("%s: %s", Redact(dsn), scrub(err.Error(), dsn))
	}
	return cfg, nil
}

// splitDSN cuts dsn where the driver does: the credentials end at the
// last '@' before the last '/' (the one before the database name), so a
// password may hold '@' and ':'.
func splitDSN(dsn string) (cred, rest string, ok bool) {
	end := strings.LastIndex(dsn, "/")
	if end < 0 {
		end = len(dsn)
	}
	i := strings.LastIndex(dsn[:end], "@")
	if i < 0 {
		return "", dsn, false
	}
	return dsn[:i], dsn[i+1:], true
}

// dsnTail is the part of dsn after the credentials.
func dsnTail(dsn string) string {
	_, rest, _ := splitDSN(dsn)
	return rest
}

// Redact returns dsn as user@net(addr)/dbname, without the password and
// the parameters: the name of the server in messages.
func Redact(dsn string) string {
	cred, rest, ok := splitDSN(dsn)
	rest, _, _ = strings.Cut(rest, "?")
	if !ok {
		return rest
	}
	user, _, _ := strings.Cut(cred, ":")
	return user + "@" + rest
}

// password returns dsn's password ("" if none).
func password(dsn string) string {
	cred, _, _ := splitDSN(dsn)
	_, pw, _ := strings.Cut(cred, ":")
	return pw
}

// scrub removes dsn's password from msg.
func scrub(msg, dsn string) string {
	if pw := password(dsn); pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// WithPassword returns dsn with its password set to pw (the config's
// password_file); it fails if the DSN has one already.
func WithPassword(dsn, pw string) (string, error) {
	if password(dsn) != "" {
		return "", errors.New("the DSN has a password and a password file is given: keep one")
	}
	cred, rest, ok := splitDSN(dsn)
	if !ok || cred == "" {
		return "", errors.New("the DSN names no user (user@tcp(host:3306)/dbname) for the password file's password")
	}
	user, _, _ := strings.Cut(cred, ":")
	return user + ":" + pw + "@" + rest, nil
}
