// Package etcdtest runs a real etcd cluster for tests: Start launches
// three /usr/bin/etcd members (or as many as WithMembers says) on free
// 127.0.0.1 client and peer ports, each with its data directory in
// t.TempDir(), with short heartbeat and election timeouts (50 ms and 500
// ms) so that failovers take about a second. Members can be killed
// (SIGKILL), restarted on the same ports from the same data directory
// (they rejoin), and paused (SIGSTOP); Leader says which member leads.
// Proxies (netproxy.Proxy, one per member) sit between a client and the
// members to cut or blackhole that one client.
//
// Every process is started by this package and killed by PID at the
// test's cleanup (SIGCONT first if paused, then SIGKILL, then reaped). As a
// safety net against a test binary that dies without its cleanups, the
// members are started with Pdeathsig=SIGKILL on Linux.
//
// The etcd binary must be at /usr/bin/etcd or on PATH (Debian: apt-get
// install etcd-server); if it is missing the test fails, it is never
// skipped.
package etcdtest
