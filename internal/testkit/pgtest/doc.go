// Package pgtest runs throwaway PostgreSQL servers for tests, in the
// spirit of httptest.NewServer and of its sibling redistest: Start gives a
// test a real server on a free 127.0.0.1 port with a password-protected
// role, and t.Cleanup tears it down.
//
// A server comes from the Debian postgresql package's binaries
// (/usr/lib/postgresql/VERSION/bin, the highest version). Its data
// directory is a copy of a template cluster (initdb, then a role and a
// database "leasecron"), made once and kept in the system's temporary
// directory across runs like a build cache; the copy lives in a fresh
// temporary directory of its own, removed at cleanup. fsync stays on
// (unlike the other kits' servers): with it off, in a fresh-clone run,
// TestPutCleanupNoDeadlockNegative's crossing transactions did not meet
// and its deadlock did not show. Clients log in over TCP with scram-sha-256 (pg_hba.conf), and the
// superuser "postgres" connects without a password over the Unix socket
// in the server's directory only (Exec, Terminate).
//
// Faults are real: Kill SIGKILLs the postmaster and all its backends (its
// children), Restart starts it again on the same port and data
// directory (PostgreSQL recovers every acknowledged commit), Pause and
// Resume send SIGSTOP and SIGCONT to the postmaster and every backend, Terminate runs
// pg_terminate_backend on the role's connections, and Proxy puts a
// netproxy.Proxy (generic TCP: latency, blackhole, cut) in front.
//
// PostgreSQL refuses to run as root: when the tests run as root, the
// server runs as the "postgres" system user if it exists, else as
// "nobody", and owns its directory. Cleanup kills exactly the processes
// started here (SIGCONT first if paused, then SIGKILL) and waits for them;
// they are also started with Pdeathsig=SIGKILL on Linux, so they die with
// a test binary that exits without running its cleanups. A missing
// postgres binary fails the test with how to install it; tests are never
// skipped.
package pgtest
