package lease

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Data loss without a restart. A node can lose its dataset while its
// process, run_id and connections stay: FLUSHALL or FLUSHDB, or a master
// that was made a replica of another server (the dataset is replaced by
// the other's) and promoted again. INFO on a new connection does not see
// that, so every round to a plain or Sentinel node ends with birth.lua,
// which reads (and, in an empty dataset, writes once) a marker key holding
// the server time at which the dataset began and a random nonce. A marker
// that is missing or different from the one this client saw last means
// the dataset was replaced: the node counts as restarted at that moment.
// Every new connection reads the marker too, so that the first Ping of a
// node already knows its age.
// A marker seen for the first time tells how old the dataset is, also for
// a client that meets the node long after a flush. The marker is read
// after the round's scripts, in the same pipeline, so a flush before a
// grant is always seen with it; a flush after the marker was read comes
// after the grant, like a restart after it.
//
// Ages are measured on the server's clock and turned into this client's
// time by subtracting them from the moment the answer arrived (so the
// estimate of when the data began is late by at most one round trip, the
// safe direction); only clock rates matter, not offsets between hosts.
//
// A Redis Cluster node has no marker: a key of fixed name lives on one
// shard only. Its shards are watched by run_id and master_replid on new
// connections only.

// birthKey is the marker key, in the database of the node URL.
const birthKey = "leasecron:lease:birth"

var (
	//go:embed birth.lua
	birthSrc    string
	birthScript = redis.NewScript(birthSrc)
)

// birthCall is the marker check appended to every round of a plain or
// Sentinel node.
func (n *node) birthCall() call {
	return call{script: birthScript, keys: []string{birthKey}, args: []any{n.nonce}}
}

// checkBirth reads the data marker on a new connection (before Ping
// reports whether the node votes, or a round is sent on it), except on a
// Cluster.
func (n *node) checkBirth(ctx context.Context, cn *redis.Conn) error {
	if n.perShard {
		return nil
	}
	bc := n.birthCall()
	return n.noteBirth(cn.EvalSha(ctx, bc.script.Hash(), bc.keys, bc.args...), time.Now())
}

// noteBirth folds the marker check's answer, received at recv, into the
// node's data birth. It returns an error when the check failed: the round's
// grants must not count then.
func (n *node) noteBirth(cmd *redis.Cmd, recv time.Time) error {
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("data marker check: %w", err)
	}
	vals, _ := cmd.Val().([]any)
	if len(vals) < 2 {
		return fmt.Errorf("data marker check: unexpected reply %v", cmd.Val())
	}
	marker := toString(vals[0])
	serverNow := toInt64(vals[1])
	birth := recv // the marker could not be written: the data is new
	if marker != "" {
		us, _, _ := strings.Cut(marker, " ")
		b, err := strconv.ParseInt(us, 10, 64)
		if err != nil {
			return errors.New("data marker check: malformed marker")
		}
		birth = recv.Add(-time.Duration(max(serverNow-b, 0)) * time.Microsecond)
	}
	n.mu.Lock()
	replaced := false
	switch {
	case !n.markerSeen:
		// First sight: the marker says how old the data is.
	case marker == n.marker && marker != "":
		n.mu.Unlock()
		return nil // the same dataset as last time
	default:
		// Another dataset than last time, or none: it may be an old copy
		// of another server's, so it begins now.
		birth = recv
		replaced = n.marker != ""
		if replaced {
			n.restartedAt = recv
		}
	}
	n.marker, n.markerSeen = marker, true
	if birth.After(n.votingFrom) {
		n.votingFrom = birth
	}
	votingAt := n.votingFrom.Add(n.guardAtDetect())
	n.mu.Unlock()
	if replaced && n.obs != nil && n.obs.OnRestart != nil {
		n.obs.OnRestart(n.name, votingAt)
	}
	return nil
}

// dataBirth returns the node's data birth: the latest instant at which it
// may have begun with an empty or replaced dataset, as far as the client
// knows (its start, a restart, failover or flush detected since).
func (n *node) dataBirth() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.votingFrom
}

// votesFor reports whether a node with data birth `birth` votes for a
// request at now: it must not have begun within the guard before now, nor
// before epochTime (when set). The second check is what keeps a node that
// may have lost an epoch's completion mark from voting for that epoch;
// the guard is its margin for the wall-clock offset between the host that
// set epochTime and this one (see the package documentation).
func votesFor(birth, now, epochTime time.Time, guard time.Duration) (bool, error) {
	from := birth.Add(guard)
	if now.Before(from) {
		return false, ErrRestarted
	}
	if !epochTime.IsZero() && epochTime.Before(from) {
		return false, ErrDataYounger
	}
	return true, nil
}
