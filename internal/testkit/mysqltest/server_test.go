package mysqltest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
)

// TestMain fails the run if a server started by the tests outlives them.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := mysqltest.Leftover(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "mysqltest: servers left running after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// TestStartRestart: a row written before a SIGKILL is there after Restart
// on the same port, and KillConnections ends the user's sessions.
func TestStartRestart(t *testing.T) {
	s := mysqltest.Start(t)
	s.Exec("CREATE TABLE " + mysqltest.Database + ".t (k INT PRIMARY KEY) ENGINE=InnoDB")
	s.Exec("INSERT INTO " + mysqltest.Database + ".t VALUES (7)")
	addr := s.Addr()
	s.Kill()
	if s.PID() != 0 {
		t.Fatal("PID after Kill")
	}
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, s.Addr())
	}
	var k int
	s.QueryRow("SELECT k FROM "+mysqltest.Database+".t", nil, &k)
	if k != 7 {
		t.Fatalf("row after restart: %d", k)
	}
	s.Pause()
	s.Resume()
	s.QueryRow("SELECT 1", nil, &k)
}
