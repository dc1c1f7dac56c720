package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/lease"
)

// Data loss without a restart. A node can lose its dataset while its
// process, run_id and connections stay: FLUSHALL or FLUSHDB, or a master
// that was made a replica of another server (the dataset is replaced by
// the other's) and promoted again. INFO on a new connection does not see
// that, so every round to a plain or Sentinel node (but a round of
// releases only: releasesOnly) ends with the marker
// check of birth.lua (run inside the round's last script call, see
// withBirth), which reads (and, in an empty dataset, writes once) a marker
// key holding
// the server time at which the dataset began, a random nonce and the
// writer's layout of keys (layout.go). A marker
// that is missing or different from the one this client saw last means
// the dataset was replaced: the node counts as restarted at that moment.
// Every new connection reads the marker too, so that the first Health of a
// node already knows its age.
// A marker seen for the first time tells how old the dataset is, also for
// a client that meets the node long after a flush. The check also returns
// the server's master_replid: a master demoted and promoted again keeps
// its connections, and after a full sync from its own former replica its
// marker is its own old one; a new master_replid on a connection that
// stayed open counts as a restart at that moment as well. The marker is read
// after the round's scripts, in the same pipeline (in the same atomic
// script step as the last of them), so a flush before a grant is always
// seen with it; a flush after the marker was read comes after the grant,
// like a restart after it.
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

// birthCall is the marker check sent on its own: on a new connection, and
// at the end of a round without script calls (Client.Warm's PINGs).
func (n *node) birthCall() call {
	return call{script: birthScript, keys: []string{birthKey}, args: []any{n.markerTail()}}
}

// Rounds with script calls do not send birth.lua as a call of its own: the
// last script call of the round runs in a variant of its script that reads
// the marker after its own work, in the same atomic step (birthWrap). That
// is the same check, at the same place (after every call of the round),
// without a second script per round. The variant reads the server's clock
// only when it is needed: to write a new marker, or when the client has
// not seen the node's marker yet (the marker's age is then needed).

// birthWrapHead and birthWrapTail surround a script's body (in its
// generation-checking variant, gen.go) to make its marker-checking variant. The variant takes the marker key as its last
// KEYS entry and, as its last two ARGV entries, the client's nonce and
// layout (markerTail) and "1"
// when the server time is wanted; the body sees KEYS and ARGV without
// them. It returns {body's reply, marker, server time µs ("0": not read),
// master_replid};
// a body that fails (a Redis or Lua error) does not fail the marker check:
// its error is returned in the first element.
const birthWrapHead = `local bkey = table.remove(KEYS)
local bclock = table.remove(ARGV)
local bnonce = table.remove(ARGV)
local bok, bres = pcall(function()
`

const birthWrapTail = `
end)
if not bok then
  if type(bres) ~= 'table' or not bres.err then
    bres = {err = tostring(bres)}
  end
end
local bnow = '0'
local function clock()
  local t = redis.call('TIME')
  return t[1] .. string.format('%06d', tonumber(t[2]))
end
local brid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)') or ''
local b = redis.call('GET', bkey)
if b then
  if bclock == '1' then
    bnow = clock()
  end
  return {bres, b, bnow, brid}
end
bnow = clock()
b = bnow .. ' ' .. bnonce
local ok = redis.pcall('SET', bkey, b)
if type(ok) == 'table' and ok.err then
  return {bres, '', bnow, brid}
end
return {bres, b, bnow, brid}
`

// birthWrapped maps each lane script (the rounds' and the store's) to
// its marker-checking variant: a store call checks the marker inside its
// own script too, not with a call of its own after it.
var birthWrapped = func() map[*redis.Script]*redis.Script {
	m := map[*redis.Script]*redis.Script{}
	for _, s := range laneScripts() {
		m[s.script] = redis.NewScript(birthWrapHead + genHead + s.src + birthWrapTail)
	}
	return m
}()

// wrappedSources are the sources of the marker-checking variants (loaded
// on every connection with the others).
func wrappedSources() []string {
	out := make([]string, 0, len(roundScripts)+2)
	for _, s := range laneScripts() {
		out = append(out, birthWrapHead+genHead+s.src+birthWrapTail)
	}
	return out
}

// withBirth returns c in its marker-checking variant, which checks the
// lane's generation too (gen.go): the generation key and the marker key,
// the generation and the nonce appended (in new slices: c's may share a
// backing array).
func (n *node) withBirth(c call, clock bool) call {
	keys := make([]string, len(c.keys)+2)
	copy(keys, c.keys)
	keys[len(c.keys)] = n.genKey()
	keys[len(c.keys)+1] = birthKey
	args := make([]any, len(c.args)+3)
	copy(args, c.args)
	args[len(c.args)] = strconv.FormatInt(n.gen, 10)
	args[len(c.args)+1] = n.markerTail()
	args[len(c.args)+2] = "0"
	if clock {
		args[len(c.args)+2] = "1"
	}
	return call{script: birthWrapped[c.script], keys: keys, args: args}
}

// needClock reports whether the round's marker check should also read the
// server's clock: the client has not seen the node's marker yet.
func (n *node) needClock() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.markerSeen
}

// unwrapBirth splits the reply of a marker-checking call: cmd gets the
// body's own reply (or error), and the marker check's answer is returned
// as {marker, server time, master_replid} for noteBirth, with the call's error if it
// failed as a whole.
func unwrapBirth(cmd *redis.Cmd) ([]any, error) {
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	vals, _ := cmd.Val().([]any)
	if len(vals) != 4 {
		err := fmt.Errorf("unexpected reply %v", cmd.Val())
		cmd.SetErr(err)
		return nil, err
	}
	if e, ok := vals[0].(error); ok {
		cmd.SetErr(e)
	} else {
		cmd.SetVal(vals[0])
	}
	return vals[1:], nil
}

// checkBirth reads the data marker on a new connection (before Health
// reports whether the node votes, or a round is sent on it), except on a
// Cluster.
func (n *node) checkBirth(ctx context.Context, cn *redis.Conn) error {
	if n.perShard {
		return nil
	}
	bc := n.birthCall()
	cmd := cn.EvalSha(ctx, bc.script.Hash(), bc.keys, bc.args...)
	vals, _ := cmd.Val().([]any)
	err := n.noteBirth(vals, cmd.Err(), time.Now())
	if errors.Is(err, ErrOtherLayout) {
		return n.refuse(err)
	}
	return err
}

// noteBirth folds the marker check's answer ({marker, server time µs,
// master_replid} or the error of the check), received at recv, into the
// node's data birth. It returns an error when the check failed: the
// round's grants must not count then.
func (n *node) noteBirth(vals []any, err error, recv time.Time) error {
	if err != nil {
		return fmt.Errorf("data marker check: %w", err)
	}
	if len(vals) < 3 {
		return fmt.Errorf("data marker check: unexpected reply %v", vals)
	}
	marker := toString(vals[0])
	serverNow := toInt64(vals[1])
	promoted := n.noteReplID(toString(vals[2]))
	birth := recv // the marker could not be written: the data is new
	if marker != "" {
		if err := checkLayout(marker); err != nil {
			return err
		}
		us, _, _ := strings.Cut(marker, " ")
		b, err := strconv.ParseInt(us, 10, 64)
		if err != nil {
			return errors.New("data marker check: malformed marker")
		}
		if serverNow > 0 {
			birth = recv.Add(-time.Duration(max(serverNow-b, 0)) * time.Microsecond)
		}
		// Without the server's time (not asked for: the marker was seen
		// before) a first sight dates the data from now, the safe side.
	}
	n.mu.Lock()
	replaced := false
	switch {
	case promoted:
		// The server restarted or was promoted since the last check, on
		// a connection that stayed open: whatever its marker, its dataset
		// may be an older copy of its own (synced back from a former
		// replica), so it begins now.
		birth, replaced = recv, true
		n.restartedAt = recv
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

// noteReplID records the master_replid a marker check returned and
// reports whether it differs from the one the node's server had before
// (on a connection set up earlier or the last round): a restart or a
// promotion since, on a connection that stayed open.
func (n *node) noteReplID(rid string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if rid == "" {
		return false
	}
	prev := n.replID
	n.replID = rid
	return prev != "" && prev != rid && !n.noReplIDCheck
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
// set epochTime and this one (see the package documentation). It is
// checked first: ErrDataYounger is final for the epoch (a data birth only
// moves later), ErrRestarted ends with the guard, and a caller told the
// first gives the epoch up instead of retrying it until its guard ends.
func votesFor(birth, now, epochTime time.Time, guard time.Duration) (bool, error) {
	from := birth.Add(guard)
	if !epochTime.IsZero() && epochTime.Before(from) {
		return false, lease.ErrDataYounger
	}
	if now.Before(from) {
		return false, lease.ErrRestarted
	}
	return true, nil
}
