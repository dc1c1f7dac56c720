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
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/leasecron/leasecron/lease"
)

// laneReadTimeout bounds one pipelined round on a node's lane. It is long on
// purpose: per-request timeouts are enforced by the caller's decision timer,
// not by closing the connection, so that a cleanup queued behind a slow
// request travels on the same connection and is applied after it.
const laneReadTimeout = 10 * time.Second

// node is one independent Redis master (a plain server, a Sentinel-managed
// master or a whole Redis Cluster) with its ordered request lane.
type node struct {
	name string // redacted URL, safe to log
	rdb  redis.UniversalClient
	obs  *Observer

	mu            sync.Mutex
	runIDs        map[string]string // server (see perShard) -> run_id last seen
	perShard      bool              // a Redis Cluster: one server per shard address
	viaSentinel   bool              // a Sentinel-managed master: connections to the Sentinels run onConnect too
	votingFrom    time.Time         // data birth: the node's data may have begun then; it votes from votingFrom+guard
	restartedAt   time.Time         // last restart/failover detected (zero: none)
	onConnectErr  error
	lastFail      error // the last round's connection-level failure; nil after a round that went through
	queue         []*op
	closed        bool
	wake          chan struct{}
	laneDone      chan struct{}
	guardAtDetect func() time.Duration
	servers       *servers    // the client's run_id registry (duplicate servers)
	noReload      atomic.Bool // tests only: do not reload scripts on NOSCRIPT

	// liveErr is why the server failed checkServer on a connection the
	// lane kept using (nil: it passed); checkedAt is when the lane last
	// checked (lane goroutine only).
	liveErr   error
	checkedAt time.Time

	// The data marker (see birth.go): the value last seen, whether one
	// was seen, and the nonce this client writes into a new one.
	marker     string
	markerSeen bool
	nonce      string
	// gen is the lane's generation, genRaise whether the next round must
	// raise the node's generation key to it first (gen.go); executor
	// only. noGenRaise (tests only) keeps the generation as it is after a
	// failed round.
	gen        int64
	genRaise   bool
	noGenRaise atomic.Bool

	// replID is the server's master_replid as last seen (on a new
	// connection or by a marker check); noReplIDCheck (tests only) makes
	// marker checks ignore a change of it.
	replID        string
	noReplIDCheck bool

	// lane is the lane's own connection to a single-server node (none
	// until the first round, after a round that failed or an idle spell,
	// and for a Cluster); only the executor uses it.
	lane stickyConn

	// executing is set while a round runs, on the lane or inline (one
	// executor at a time, see runLane); inline is the single-node fast
	// path (nil: none; see inline.go).
	executing bool
	inline    *inlinePath
}

// call is one script invocation inside an op.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
}

// op is a group of calls sent together in one pipeline; an op without
// calls sends a PING (Client.Warm). reply is called exactly once, from the
// lane goroutine.
type op struct {
	calls []call
	// abandoned, when non-nil and closed before the op is sent, makes the
	// lane skip it (only for requests whose effect nobody waits for any more
	// and that leave nothing behind if never sent).
	abandoned <-chan struct{}
	reply     func(res []*redis.Cmd, err error)
}

var errAbandoned = errors.New("abandoned before send")

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

func newNode(name string, rdb redis.UniversalClient, obs *Observer, guard func() time.Duration) *node {
	n := &node{
		name:          name,
		rdb:           rdb,
		obs:           obs,
		runIDs:        map[string]string{},
		wake:          make(chan struct{}, 1),
		laneDone:      make(chan struct{}),
		guardAtDetect: guard,
		nonce:         lease.NewToken(),
	}
	return n
}

// onConnect runs on every new connection before it is used: it learns the
// server's run_id and uptime (restart detection), refuses replicas, servers
// that can evict keys or hide their run_id (checkServer) and a server
// another node already reached (servers.claim), and loads the scripts so
// that EVALSHA works inside pipelines.
func (n *node) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server", "replication", "memory").Result()
	if err != nil {
		return fmt.Errorf("INFO: %w", err)
	}
	fields := parseInfo(info)
	if fields["redis_mode"] == "sentinel" {
		if n.viaSentinel {
			// go-redis runs OnConnect on its connections to the
			// Sentinels too; they only say where the master is.
			return nil
		}
		return n.refuse(errors.New("node is a Sentinel (redis_mode:sentinel); list it as redis+sentinel://host:port?master_name=NAME"))
	}
	if fields["role"] == "slave" {
		return n.refuse(errors.New("node is a replica (role:slave); leasecron needs masters"))
	}
	if err := checkServer(fields); err != nil {
		return n.refuse(err)
	}
	// The run_id changes on a restart, the master_replid on a restart
	// and on every promotion: a master that was demoted and promoted again
	// keeps its run_id, but its dataset may have been replaced.
	runID := fields["run_id"] + " " + fields["master_replid"]
	uptime, _ := strconv.ParseInt(fields["uptime_in_seconds"], 10, 64)
	// A master that was promoted from a replica keeps the old replication
	// ID's end offset (second_repl_offset) until it restarts; Redis does
	// not say when the promotion happened.
	promoted := fields["second_repl_offset"] != "" && fields["second_repl_offset"] != "-1"
	now := time.Now()
	n.mu.Lock()
	// A plain or Sentinel node is one server at a time: a new run_id behind
	// it is a restart or a failover, even at a new address (a promoted
	// replica may lack the latest writes). A Cluster has one per shard.
	addr := ""
	if n.perShard {
		addr = cn.String()
	}
	prev, seen := n.runIDs[addr]
	if err := n.servers.claim(n, runID, prev); err != nil {
		n.onConnectErr = err
		n.mu.Unlock()
		return err
	}
	n.onConnectErr = nil
	n.runIDs[addr] = runID
	if !n.perShard {
		n.replID = fields["master_replid"]
	}
	var base time.Time
	restarted := false
	switch {
	case !seen && promoted:
		// First sight of a promoted replica: it may have been promoted
		// a moment ago, without leases its old master granted.
		base, restarted = now, true
	case !seen:
		// First sight: the process started about uptime seconds ago
		// (rounded down by Redis, hence the extra second).
		base = now.Add(-time.Duration(uptime)*time.Second + time.Second)
	case prev != runID:
		// A new process (restart or failover) behind the same address.
		base, restarted = now, true
	}
	if restarted {
		n.restartedAt = now
	}
	if base.After(n.votingFrom) {
		n.votingFrom = base
	}
	votingAt := n.votingFrom.Add(n.guardAtDetect())
	n.mu.Unlock()
	if restarted && n.obs != nil && n.obs.OnRestart != nil {
		n.obs.OnRestart(n.name, votingAt)
	}
	pipe := cn.Pipeline()
	for _, src := range allScriptSources {
		pipe.ScriptLoad(ctx, src)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	return n.checkBirth(ctx, cn)
}

// unanswered is the error for a round that got no answer from the node
// and stopped waiting with err: a timeoutErr names how the node's previous
// round failed, if it did.
func (n *node) unanswered(err error) error {
	te, ok := err.(timeoutErr)
	if !ok {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	te.last = n.lastFail
	return te
}

// refuse records err as the reason the node cannot be used (shown by Health)
// and returns it, so that go-redis drops the connection.
func (n *node) refuse(err error) error {
	n.mu.Lock()
	n.onConnectErr = err
	n.mu.Unlock()
	return err
}

func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// voting reports whether the node's grants count at time now.
func (n *node) voting(now time.Time, guard time.Duration) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !now.Before(n.votingFrom.Add(guard))
}

// status returns the restart bookkeeping for Health.
func (n *node) status(guard time.Duration) (votingAt, restartedAt time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.votingFrom.Add(guard), n.restartedAt
}

// anyCmdErr reports whether some command of a pipeline has an error.
func anyCmdErr(cmds [][]*redis.Cmd) bool {
	for _, cs := range cmds {
		for _, c := range cs {
			if c.Err() != nil {
				return true
			}
		}
	}
	return false
}

// isReplyError reports whether err is a Redis error reply (one command
// failed) rather than a connection failure.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
