package zktest

import (
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

// writeLogConfig writes the server's log4j.properties: warnings, and the
// servers' state changes (elections), to zookeeper.log in its directory.
func (s *Server) writeLogConfig() error {
	log4j := "log4j.rootLogger=WARN, F\nlog4j.logger.org.apache.zookeeper.server.quorum.QuorumPeer=INFO\n" +
		"log4j.appender.F=org.apache.log4j.FileAppender\n" +
		"log4j.appender.F.File=" + filepath.Join(s.dir, "zookeeper.log") + "\n" +
		"log4j.appender.F.layout=org.apache.log4j.PatternLayout\n" +
		"log4j.appender.F.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
	return os.WriteFile(filepath.Join(s.dir, "log4j.properties"), []byte(log4j), 0o644)
}

// logIfFailed logs every server's state changes (elections: looking,
// following, leading) and its last warnings (a slow fsync, say) when the
// test failed: they explain most failures of an ensemble.
func (e *Ensemble) logIfFailed() {
	if !e.t.Failed() {
		return
	}
	for _, s := range e.Servers {
		data, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
		var states, warns []string
		for _, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.Contains(l, "Peer state changed"):
				states = append(states, l)
			case strings.Contains(l, " WARN ") || strings.Contains(l, " ERROR "):
				warns = append(warns, l)
			}
		}
		e.t.Logf("zktest: server %d (%s), its state changes:\n%s\nits last warnings:\n%s", s.ID, s.Addr(),
			strings.Join(states[max(0, len(states)-30):], "\n"), strings.Join(warns[max(0, len(warns)-10):], "\n"))
	}
}

func (s *Server) logTail() string {
	return proctest.Tail(40, filepath.Join(s.dir, "zookeeper.log"), filepath.Join(s.dir, "stdout.log"))
}
