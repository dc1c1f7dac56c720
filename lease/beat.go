package lease

import (
	"context"
	"time"
)

// Beat is a host's round of every heartbeat: it writes its own entry
// (its heartbeat), reads the live entries of the spaces it watches (the
// hosts' heartbeats, the pause flags) and sees how each server answered.
// A backend that implements Beater does all of it in one round trip per
// server, so that an idle host costs its store one request per
// heartbeat; DoBeat falls back to Put, List and Health otherwise.
type Beat struct {
	// Space and Entry are what to write (Put's arguments).
	Space string
	Entry Entry
	// Read names the spaces to list after the write; the write is seen by
	// the read of its own space.
	Read []string
}

// BeatResult is what a Beat found.
type BeatResult struct {
	// PutErr is the write's error, as Put would return it.
	PutErr error
	// Lists holds the live entries of each space of Beat.Read, in its
	// order and sorted by name as List returns them; nil when ReadErr is
	// set.
	Lists [][]Entry
	// ReadErr is the reads' error, as List would return it.
	ReadErr error
	// Health is each server's status as Backend.Health would report it,
	// from this round's answers; nil when the backend did not look this
	// round (etcd and ZooKeeper, whose heartbeat reaches one server, ask
	// every server at most every 10 s).
	Health []ServerStatus
}

// Beater is a Backend that does a Beat in one round trip per server.
// Its Beat must keep the guarantees of the calls it replaces: the write
// as Put (a quorum, the version guard), each read as List (a read quorum
// of servers that count).
type Beater interface {
	Beat(ctx context.Context, b Beat) BeatResult
}

// DoBeat runs b on be: with be's Beat when be is a Beater, else with a
// Put, a List of each space and a Health (2 + len(b.Read) round trips).
func DoBeat(ctx context.Context, be Backend, b Beat) BeatResult {
	if err := CheckEntry(b.Space, b.Entry); err != nil {
		return BeatResult{PutErr: err, ReadErr: err}
	}
	for _, s := range b.Read {
		if err := CheckName("space", s); err != nil {
			return BeatResult{PutErr: err, ReadErr: err}
		}
	}
	if bt, ok := be.(Beater); ok {
		return bt.Beat(ctx, b)
	}
	var r BeatResult
	r.PutErr = be.Put(ctx, b.Space, b.Entry)
	r.Lists = make([][]Entry, len(b.Read))
	for i, s := range b.Read {
		l, err := be.List(ctx, s)
		if err != nil {
			r.Lists, r.ReadErr = nil, err
			break
		}
		r.Lists[i] = l
	}
	r.Health = be.Health(ctx)
	return r
}

// ServerHealth is the status of a server from a round's answer: err is
// how it failed (nil: it answered), latency its round trip. Beaters of a
// single server build Health with it.
func ServerHealth(server string, err error, latency time.Duration) ServerStatus {
	return ServerStatus{Server: server, Err: err, Latency: latency, Voting: err == nil}
}

// FailedBeat is the result of a Beat whose round failed as a whole with
// err on servers: the write and the reads failed, and every server is
// reported with err.
func FailedBeat(err error, servers []string, latency time.Duration) BeatResult {
	r := BeatResult{PutErr: err, ReadErr: err}
	for _, s := range servers {
		r.Health = append(r.Health, ServerHealth(s, err, latency))
	}
	return r
}
