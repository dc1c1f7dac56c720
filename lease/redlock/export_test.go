package redlock

import "time"

// DisableScriptReload makes c's lanes leave NOSCRIPT errors as they are
// (the behaviour before they reloaded the scripts), for the negative
// control of the reload.
func DisableScriptReload(c *Client) {
	for _, n := range c.nodes {
		n.noReload.Store(true)
	}
}

// InlineRounds returns how many rounds c's nodes ran on their callers'
// goroutines (the single-node fast path).
func InlineRounds(c *Client) int64 {
	var sum int64
	for _, n := range c.nodes {
		if n.inline != nil {
			sum += n.inline.rounds.Load()
		}
	}
	return sum
}

// InlineConn returns the CLIENT ID and address (as the server sees it) of
// the inline path's connection of c's single node, and whether it is
// ready to be used inline.
func InlineConn(c *Client) (id int64, addr string, ready bool) {
	n := c.nodes[0]
	if n.inline == nil {
		return 0, "", false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.inline.id, n.inline.addr, n.inline.ready
}

// InlineKillOff returns why c's single node does not kill the connections
// of failed inline rounds (nil: it does, or has no fast path).
func InlineKillOff(c *Client) error {
	n := c.nodes[0]
	if n.inline == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.inline.killOff
}

// HasInline reports whether c's single node has a fast path at all.
func HasInline(c *Client) bool { return len(c.nodes) == 1 && c.nodes[0].inline != nil }

// DisableInlineKill makes c's single node forget the connection of a
// failed inline round instead of killing it (the negative control of the
// kill).
func DisableInlineKill(c *Client) {
	n := c.nodes[0]
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inline.noKill = true
}

// SetInlineWarmRetry sets how long c's single node waits after a failed
// set-up of its inline connection before the next one (0: none).
func SetInlineWarmRetry(c *Client, d time.Duration) {
	n := c.nodes[0]
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inline.warmRetry = d
}

// InlineWarmups returns how many set-ups of its inline connection c's
// single node has started.
func InlineWarmups(c *Client) int64 { return c.nodes[0].inline.warmups.Load() }

// IgnoreExtendTTL makes c's Extend leave its TTL out of the restart guard
// and the fence expiry (the negative control of the rule that they follow
// the longest TTL an Extend asked for too).
func IgnoreExtendTTL(c *Client) { c.test.noExtendTTL = true }

// IgnoreReplIDChange makes c's marker checks ignore a changed
// master_replid (the negative control of the failback detection on open
// connections).
func IgnoreReplIDChange(c *Client) {
	for _, l := range append(append([]*node{}, c.nodes...), c.stores...) {
		l.mu.Lock()
		l.noReplIDCheck = true
		l.mu.Unlock()
	}
}

// IgnoreGuardForStoreReads makes c count every node's answer to an entries
// or log read, also from nodes whose data is younger than the restart
// guard (the negative control of the store reads after a data loss).
func IgnoreGuardForStoreReads(c *Client) { c.test.noStoreGuard = true }

// DisableLaneGenerations makes c's lanes keep their generation after a
// round that failed on its connection, so that its requests may still be
// applied after the next round's (the negative control of the
// generation check).
func DisableLaneGenerations(c *Client) {
	for _, l := range append(append([]*node{}, c.nodes...), c.stores...) {
		l.noGenRaise.Store(true)
	}
}

// CloseWait is how long Close waits for requests that must still be sent.
const CloseWait = closeWait
