package config

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// RedisConfig is the "redis" section: the Redlock nodes.
type RedisConfig struct {
	// Nodes are the URLs of independent Redis masters (redis://, rediss://,
	// redis+sentinel://, redis+cluster://) as written in the file; a lease
	// needs len(Nodes)/2+1 of them. At least one is required. Open the
	// nodes with NodeURLs, which adds the password of PasswordFile.
	Nodes []string
	// Prefix starts every lease key; default "leasecron".
	Prefix string
	// Timeout bounds each request to one node; default 50ms. It must be
	// less than a tenth of Lease.TTL.
	Timeout time.Duration
	// PasswordFile names a file holding the password of every node whose
	// URL has none (a relative path is read from the config file's
	// directory). Validate reads it.
	PasswordFile string

	password *secret // read from PasswordFile by Validate
}

// rawRedis is the redis section as yaml.v3 decodes it.
type rawRedis struct {
	Nodes        []*text  `yaml:"nodes" want:"must be a list of URLs such as redis://host:6379/0, not %s"`
	Prefix       text     `yaml:"prefix"`
	Timeout      duration `yaml:"timeout"`
	PasswordFile text     `yaml:"password_file"`
}

// NodeURLs returns the node URLs to open, with the password read from
// PasswordFile filled in where a URL has none. The result carries secrets:
// hand it to the lease client, never log or print it (log Nodes, or
// lease.Redact of a URL).
func (r *RedisConfig) NodeURLs() []string {
	out := make([]string, len(r.Nodes))
	for i, raw := range r.Nodes {
		out[i] = raw
		if r.password == nil {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || redisHasPassword(u) {
			continue
		}
		user := ""
		if u.User != nil {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, r.password.s)
		out[i] = u.String()
	}
	return out
}

// redisHasPassword reports whether a node URL carries its own password.
func redisHasPassword(u *url.URL) bool {
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	return u.Query().Has("password")
}

// NewRedis returns a redis section of nodes with the documented defaults:
// Prefix "leasecron", Timeout 50ms.
func NewRedis(nodes ...string) *RedisConfig {
	return &RedisConfig{Nodes: nodes, Prefix: defaultPrefix, Timeout: defaultRedisTimeout}
}

// Name returns "redis".
func (r *RedisConfig) Name() string { return "redis" }

// RequestTimeout returns Timeout, the per-node request timeout.
func (r *RedisConfig) RequestTimeout() time.Duration { return r.Timeout }

// Equal reports whether o is a redis section with the same nodes (and
// passwords), prefix and timeout.
func (r *RedisConfig) Equal(o Section) bool {
	x, ok := o.(*RedisConfig)
	return ok && slices.Equal(r.NodeURLs(), x.NodeURLs()) && r.Prefix == x.Prefix && r.Timeout == x.Timeout
}

// Summary says how many nodes the section has: "3 nodes".
func (r *RedisConfig) Summary(LeaseConfig) string { return plural(len(r.Nodes), "node") }

// Open connects to the Redlock nodes (with the password of PasswordFile),
// with o.Lease's drift and its ttl as the restart guard.
func (r *RedisConfig) Open(ctx context.Context, o OpenOptions) (lease.Backend, error) {
	lopts := []redlock.Option{
		redlock.WithTimeout(max(r.Timeout, o.MinTimeout)),
		redlock.WithDrift(o.Lease.Drift),
		redlock.WithRestartGuard(o.Lease.TTL),
		redlock.WithObserver(redlock.Observer{
			OnVote: func(e redlock.VoteEvent) {
				if o.OnVote != nil {
					o.OnVote(e.Node, e.Op, e.Vote.String(), e.Latency)
				}
			},
			OnRestart: func(node string, at time.Time) {
				if o.OnRestart != nil {
					o.OnRestart(node)
				}
				if o.Log != nil {
					o.Log.Warn("redis node restarted or failed over; it does not vote until the restart guard passed",
						"node", node, "votes_again_in", time.Until(at).Round(time.Second))
				}
			},
		}),
	}
	if o.UnsafeNoRestartDetection {
		lopts = append(lopts, redlock.WithoutRestartDetection())
	}
	be, err := redlock.Open(ctx, redlock.Config{Nodes: r.NodeURLs(), Prefix: r.Prefix, Options: lopts})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return be, nil
}

// section builds the redis section from the file.
func (r *rawRedis) section(d *decoder) Section {
	dst := NewRedis()
	dst.Nodes = d.texts("redis.nodes", r.Nodes, "empty node URL")
	if d.take("redis.prefix", r.Prefix.leaf) {
		dst.Prefix = r.Prefix.v
	}
	if d.take("redis.timeout", r.Timeout.leaf) {
		dst.Timeout = r.Timeout.v
	}
	if d.take("redis.password_file", r.PasswordFile.leaf) {
		dst.PasswordFile = r.PasswordFile.v
	}
	return dst
}

// redis checks the redis section: at least one node, each a redis://,
// rediss://, redis+sentinel:// or redis+cluster:// URL with a host, none
// twice (an even number of nodes is only a warning); a non-empty prefix
// without braces; a password_file that can be read.
func (r *RedisConfig) check(v *validator) {
	if len(r.Nodes) == 0 && !v.failed("redis.nodes") {
		v.errorf("redis.nodes", 0, "at least one Redis node is needed (a list of URLs such as redis://127.0.0.1:6379/0)")
	}
	seen := map[string]int{}
	withPassword := 0
	for i, raw := range r.Nodes {
		field := fmt.Sprintf("redis.nodes[%d]", i)
		key, msg := checkNode(raw)
		if msg == "" {
			// What the lease client would refuse at start: options
			// go-redis does not know, say.
			if err := redlock.CheckURL(raw); err != nil {
				msg = err.Error()
			}
		}
		if msg != "" {
			v.errorf(field, 0, "%s: %s", redactNode(raw), msg)
			continue
		}
		if u, err := url.Parse(raw); err == nil && redisHasPassword(u) {
			withPassword++
		}
		if first, dup := seen[key]; dup {
			other := fmt.Sprintf("redis.nodes[%d]", first)
			where := ""
			if l := v.lineOf(other, 0); l > 0 {
				where = fmt.Sprintf(" (line %d)", l)
			}
			v.errorf(field, 0, "%s: duplicate node: the same server as %s%s; the nodes must be independent Redis masters", redactNode(raw), other, where)
			continue
		}
		seen[key] = i
	}
	if n := len(r.Nodes); n > 0 && n%2 == 0 {
		v.warnf("redis.nodes", 0, "%d nodes: an even number survives no more failures than %d would (quorum %d of %d); use an odd number", n, n-1, n/2+1, n)
	}
	switch {
	case r.Prefix == "":
		v.errorf("redis.prefix", 0, "empty key prefix")
	case strings.ContainsAny(r.Prefix, "{} \t\r\n"):
		v.errorf("redis.prefix", 0, "prefix %q must not contain braces or spaces (keys use {hash tags})", r.Prefix)
	}
	r.password = v.passwordFile("redis.password_file", r.PasswordFile)
	if r.password != nil && len(r.Nodes) > 0 && withPassword == len(r.Nodes) {
		v.warnf("redis.password_file", 0, "not used: every node URL has its own password")
	}
}

// redactNode is lease.Redact, and for a string that is not a URL with a
// host (where lease.Redact cannot tell a password from a port), the text up
// to its first ':' only.
func redactNode(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" && u.Opaque == "" {
		return redlock.Redact(raw)
	}
	r := redlock.Redact(raw)
	if before, _, ok := strings.Cut(r, ":"); ok && r == raw {
		return before + ":xxxxx"
	}
	return r
}

// checkNode checks the syntax of a node URL. It returns a key that is the
// same for two URLs of the same server, or a message that does not quote
// the URL.
func checkNode(raw string) (key, msg string) {
	const want = "want redis://[user:password@]host:port[/db], rediss://, redis+sentinel:// or redis+cluster://"
	if strings.TrimSpace(raw) == "" {
		return "", "empty node URL"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "not a valid URL (" + want + ")"
	}
	switch u.Scheme {
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
	case "":
		return "", "missing scheme (" + want + ")"
	default:
		return "", fmt.Sprintf("unsupported scheme %q (use redis, rediss, redis+sentinel or redis+cluster)", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", "missing host:port (" + want + ")"
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", "missing host"
	}
	if strings.Contains(u.Host, ":") && port == "" && !strings.HasSuffix(u.Host, "]") {
		return "", "empty port"
	}
	if port == "" {
		port = "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Sprintf("bad port %q", port)
	}
	q := u.Query()
	for _, a := range q["addr"] {
		if _, p, err := net.SplitHostPort(a); err != nil || p == "" {
			return "", fmt.Sprintf("bad addr=%q: want host:port", a)
		}
	}
	key = strings.ToLower(host) + ":" + port
	_, kind, _ := strings.Cut(u.Scheme, "+")
	switch kind {
	case "sentinel":
		mn := q.Get("master_name")
		if mn == "" {
			return "", "a redis+sentinel node needs ?master_name=NAME"
		}
		key += "/" + mn
	case "":
		if db := strings.Trim(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				return "", "bad database number: the path must be empty or a number such as /0"
			}
		}
	}
	return key, ""
}
