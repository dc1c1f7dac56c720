// Package redistest runs real redis-server processes for tests, in the
// spirit of httptest.NewServer: a test asks for k nodes, gets their
// addresses, URLs and go-redis clients, and everything is torn down by
// t.Cleanup.
//
// Start launches independent masters (the Redlock setup); StartRedisCluster
// launches a 3-master Redis Cluster; StartSentinelGroup launches a master,
// its replica and a Sentinel, and can fail over. Nodes can be killed, restarted on the
// same port (empty by default, or from their append-only file with WithAOF),
// and paused with SIGSTOP. A Proxy sits between a client and a node to add
// latency, swallow traffic (Blackhole), drop connections (Cut) or rewrite
// the node's replies (RewriteReplies: a proxy that hides run_id, say).
//
// Every process is started by this package with exec.Cmd, on its own free
// 127.0.0.1 port and in its own t.TempDir(); cleanup kills exactly those
// PIDs (SIGCONT first if paused, then SIGKILL) and waits for them. As a
// safety net against a test binary that dies without running its cleanups
// (for example on a -timeout panic), the processes are also started with
// Pdeathsig=SIGKILL on Linux, so they die with the thread that started them.
//
// redis-server (and redis-cli for StartRedisCluster) must be on PATH; if it
// is not, the test fails with a message saying how to install it. Tests are
// never skipped.
package redistest
