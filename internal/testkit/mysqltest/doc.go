// Package mysqltest runs throwaway MariaDB (or MySQL) servers for tests,
// in the spirit of httptest.NewServer and of its sibling pgtest: Start
// gives a test a real server on a free 127.0.0.1 port with a
// password-protected user, and t.Cleanup tears it down.
//
// A server is Debian's mariadb-server (mariadbd, or mysqld on PATH or in
// /usr/sbin). Each server gets a fresh data directory made by
// mariadb-install-db (or mysql_install_db) in a temporary directory of its
// own, removed at cleanup, with small InnoDB files. Each commit's log is
// written to the operating system before it is acknowledged but not
// flushed to disk (innodb_flush_log_at_trx_commit=2): a killed server
// keeps every acknowledged commit — the tests kill processes, never the
// machine — and the disk's stalls under a loaded test run do not stall
// every store at once. Clients log in over TCP
// as User with a random password into the database Database; root
// connects without a password over the Unix socket in the server's
// directory only (Exec, QueryRow, KillConnections).
//
// Faults are real: Kill SIGKILLs the server (one process), Restart starts
// it again on the same port and data directory (InnoDB recovers every
// acknowledged commit), Pause and Resume send SIGSTOP and SIGCONT,
// KillConnections runs KILL CONNECTION on the user's sessions, and Proxy
// puts a netproxy.Proxy (latency, blackhole, cut) in front.
//
// mysqld refuses to run as root: when the tests run as root, the server
// runs as the "mysql" system user if it exists, else as "nobody", and owns
// its directory. Cleanup kills exactly the process started here (SIGCONT
// first if paused, then SIGKILL) and waits for it; it is also started with
// Pdeathsig=SIGKILL on Linux, so it dies with a test binary that exits
// without running its cleanups. A missing server binary fails the test
// with how to install it; tests are never skipped.
package mysqltest
