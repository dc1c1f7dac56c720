package zktest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// The servers log through SLF4J; without a binding on the class path it
// drops every line. These two (dependencies of Debian's
// libzookeeper-java) send it to log4j 1.2, configured by the
// log4j.properties in the server's directory.
const (
	logBinding = "/usr/share/java/slf4j-log4j12.jar"
	log4jJar   = "/usr/share/java/log4j-1.2.jar"
)

// warnLogsLost says so in the test's log when the servers' logs cannot be
// written (the binding is missing).
func warnLogsLost(t testing.TB) {
	for _, jar := range []string{logBinding, log4jJar} {
		if fileMissing(jar) {
			t.Logf("zktest: %s is missing: the ZooKeeper servers' logs are lost (apt-get install libslf4j-java liblog4j1.2-java)", jar)
		}
	}
}

// writeLogConfig writes the server's log4j.properties: warnings, and what
// the quorum package says at INFO (state changes, how a follower
// synchronised with its leader; not the election's notifications or
// connection lines), to zookeeper.log in its directory, at most 10 MB
// of it (one older file is kept beside it).
func (s *Server) writeLogConfig() error {
	log4j := "log4j.rootLogger=WARN, F\n" +
		"log4j.logger.org.apache.zookeeper.server.quorum=INFO\n" +
		"log4j.logger.org.apache.zookeeper.server.quorum.FastLeaderElection=WARN\n" +
		"log4j.logger.org.apache.zookeeper.server.quorum.QuorumCnxManager=WARN\n" +
		"log4j.appender.F=org.apache.log4j.RollingFileAppender\n" +
		"log4j.appender.F.File=" + filepath.Join(s.dir, "zookeeper.log") + "\n" +
		"log4j.appender.F.MaxFileSize=10MB\n" +
		"log4j.appender.F.MaxBackupIndex=1\n" +
		"log4j.appender.F.layout=org.apache.log4j.PatternLayout\n" +
		"log4j.appender.F.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
	return os.WriteFile(filepath.Join(s.dir, "log4j.properties"), []byte(log4j), 0o644)
}

// logIfFailed logs, when the test failed, each server's state changes
// (elections: looking, following, leading), its last quorum messages
// (how followers synchronised, what the leader proposed and committed)
// and warnings, and — for a server still running and not paused — its
// figures now (mntr: outstanding requests, synced followers, the last
// zxid): a store that stalls shows there, apart from a client that
// fails.
func (e *Ensemble) logIfFailed() {
	if !e.t.Failed() {
		return
	}
	for _, s := range e.Servers {
		data, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
		var states, quorum, warns []string
		for _, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.Contains(l, "Peer state changed"):
				states = append(states, l)
			case strings.Contains(l, " WARN ") || strings.Contains(l, " ERROR "):
				warns = append(warns, l)
			case strings.Contains(l, " INFO "):
				quorum = append(quorum, l)
			}
		}
		e.t.Logf("zktest: server %d (%s), its state changes:\n%s\nits last quorum messages:\n%s\nits last warnings:\n%s\nits figures now:\n%s",
			s.ID, s.Addr(), last(states, 30), last(quorum, 30), last(warns, 10), s.figures())
	}
}

// last returns the last n of lines, one per line.
func last(lines []string, n int) string {
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Figures returns every server's figures now, as logIfFailed prints
// them: a test that finds the ensemble stalled says so with them.
func (e *Ensemble) Figures() string {
	var b strings.Builder
	for _, s := range e.Servers {
		fmt.Fprintf(&b, "server %d (%s):\n%s\n", s.ID, s.Addr(), s.figures())
	}
	return b.String()
}

// figures returns the server's mntr figures that tell a stalled server
// from a slow client, one per line ("paused" or "no answer" when it does
// not say).
func (s *Server) figures() string {
	if s.paused() {
		return "paused"
	}
	var kept []string
	for _, line := range s.fourLetter("mntr") {
		for _, name := range []string{"zk_server_state", "zk_outstanding_requests", "zk_synced_followers",
			"zk_pending_syncs", "zk_num_alive_connections", "zk_last_proposal_size", "zk_znode_count", "zk_ephemerals_count"} {
			if strings.HasPrefix(line, name+"\t") {
				kept = append(kept, line)
			}
		}
	}
	for _, line := range s.fourLetter("srvr") {
		if strings.HasPrefix(line, "Zxid:") {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		return "no answer"
	}
	return strings.Join(kept, "\n")
}

func (s *Server) logTail() string {
	return proctest.Tail(40, filepath.Join(s.dir, "zookeeper.log"), filepath.Join(s.dir, "stdout.log"))
}
