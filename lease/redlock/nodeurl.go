package redlock

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// A node's URL: what it may say (plain, Sentinel, Cluster; TLS; go-redis
// options), how it becomes a client, and how it is named without its
// password.

// CheckURL reports whether New would accept raw as a node URL (scheme,
// host and port, the options go-redis understands, master_name for a
// Sentinel node), without connecting. The error does not quote the URL or
// its password: name the node with Redact.
func CheckURL(raw string) error {
	_, rdb, err := parseNode(raw, nil, time.Second, nil)
	if rdb != nil {
		_ = rdb.Close()
	}
	return err
}

// parseNode builds a node from its URL. Supported forms:
//
//	redis://[user:pass@]host:port[/db]             plain server
//	rediss://...                                   TLS
//	redis+sentinel://[user:pass@]sentinel:port[/db]?master_name=M[&addr=s2:port...]
//	redis+cluster://[user:pass@]seed:port[?addr=seed2:port...]
//
// Errors do not quote the URL; callers name the node by its redacted URL
// (the name returned).
func parseNode(raw string, tlsConf *tls.Config, connTimeout time.Duration, onConnect func(context.Context, *redis.Conn) error) (string, redis.UniversalClient, error) {
	name := Redact(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return name, nil, errors.New("not a URL")
	}
	if u.Host == "" {
		return name, nil, errors.New("missing host:port")
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil {
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return name, nil, fmt.Errorf("bad port %q", port)
		}
	}
	base, kind, _ := strings.Cut(u.Scheme, "+")
	if base != "redis" && base != "rediss" {
		return name, nil, fmt.Errorf("unsupported scheme %q (use redis, rediss, redis+sentinel, redis+cluster)", u.Scheme)
	}
	plain := *u
	plain.Scheme = base
	setTLS := func(c **tls.Config) {
		if base == "rediss" && tlsConf != nil {
			*c = tlsConf.Clone()
		}
	}
	switch kind {
	case "":
		o, err := plainOptions(plain.String(), raw, tlsConf, connTimeout)
		if err != nil {
			return name, nil, err
		}
		o.OnConnect = onConnect
		return name, redis.NewClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(plain.String())
		if err != nil {
			return name, nil, errors.New(scrub(err, raw))
		}
		if o.MasterName == "" {
			return name, nil, errors.New("sentinel node needs ?master_name=")
		}
		if o.ReplicaOnly {
			// go-redis would send every round to a replica, which the
			// client refuses on connect: say so before that.
			return name, nil, errors.New("replica_only=true sends the rounds to replicas; leasecron needs the master (drop replica_only)")
		}
		// The user/password in the URL's user info is for the master too;
		// go-redis puts it on the sentinels only. ?username= and
		// ?password= set the master's separately.
		o.Username = cmp.Or(o.Username, o.SentinelUsername)
		o.Password = cmp.Or(o.Password, o.SentinelPassword)
		setTLS(&o.TLSConfig)
		tuneOptions(&o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries, &o.Protocol, &o.DisableIdentity, connTimeout, &o.DialTimeout)
		o.OnConnect = onConnect
		return name, redis.NewFailoverClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(plain.String())
		if err != nil {
			return name, nil, errors.New(scrub(err, raw))
		}
		setTLS(&o.TLSConfig)
		tuneOptions(&o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries, &o.Protocol, &o.DisableIdentity, connTimeout, &o.DialTimeout)
		o.MaxRedirects = 3
		o.OnConnect = onConnect
		return name, redis.NewClusterClient(o), nil
	}
	return name, nil, fmt.Errorf("unsupported scheme %q (use redis, rediss, redis+sentinel, redis+cluster)", u.Scheme)
}

// plainOptions returns the go-redis options of a plain server's URL
// (redis:// or rediss://, its scheme already checked); raw is the URL as
// given, whose passwords errors must not quote.
func plainOptions(plain, raw string, tlsConf *tls.Config, connTimeout time.Duration) (*redis.Options, error) {
	o, err := redis.ParseURL(plain)
	if err != nil {
		return nil, errors.New(scrub(err, raw))
	}
	if strings.HasPrefix(plain, "rediss:") && tlsConf != nil {
		o.TLSConfig = tlsConf.Clone()
	}
	tuneOptions(&o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries, &o.Protocol, &o.DisableIdentity, connTimeout, &o.DialTimeout)
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return o, nil
}

func tuneOptions(read, write *time.Duration, retries, proto *int, noIdent *bool, connTimeout time.Duration, dial *time.Duration) {
	*read, *write = laneReadTimeout, laneReadTimeout
	*retries = -1 // never resend: a resent SET could land after our DEL
	*proto = 2
	*noIdent = true
	if *dial == 0 || *dial > connTimeout {
		*dial = connTimeout
	}
}

// Redact returns the URL with its password, and the value of every query
// parameter whose name contains "pass" (password=, sentinel_password=),
// replaced by "xxxxx", safe to log. Strings that are not URLs with a host
// part (a missing scheme, for example) lose everything up to the last '@'.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || (u.User == nil && strings.Contains(raw, "@")) {
		// Not a URL with an authority ("user:pw@host:6379" parses as
		// scheme "user" with an opaque rest): drop everything that could be
		// a credential.
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "xxxxx@" + raw[i+1:]
		}
		return raw
	}
	q, redacted := u.Query(), false
	for k := range q {
		if isPasswordParam(k) {
			q[k], redacted = []string{"xxxxx"}, true
		}
	}
	if redacted {
		u.RawQuery = q.Encode() // re-encoding sorts the parameters
	}
	return u.Redacted()
}

// isPasswordParam reports whether a URL query parameter carries a password.
func isPasswordParam(name string) bool {
	return strings.Contains(strings.ToLower(name), "pass")
}

// queryPasswords returns the non-empty values of u's password parameters.
func queryPasswords(u *url.URL) []string {
	var pws []string
	for k, vs := range u.Query() {
		if isPasswordParam(k) {
			for _, v := range vs {
				if v != "" {
					pws = append(pws, v)
				}
			}
		}
	}
	return pws
}

// scrub removes any password of raw (in its user info or its query) that a
// library error might quote.
func scrub(err error, raw string) string {
	msg := err.Error()
	u, perr := url.Parse(raw)
	if perr != nil {
		return msg
	}
	pws := queryPasswords(u)
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			pws = append(pws, pw)
		}
	}
	for _, pw := range pws {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}
