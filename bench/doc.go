// Package bench measures leasecron's lease client and backends as ordinary
// Go benchmarks on real servers that the test kits start on loopback: each
// operation side by side with its floor (what no lock on that store can
// beat: bare round trips, a raw INSERT, a pipelined SET NX PX) and with the
// library users would pick instead (redsync, bsm/redislock, etcd's
// concurrency.Mutex, go-zookeeper's Lock), all in the same run.
//
//	cd bench
//	go test -run '^$' -bench . -count 5 -timeout 60m | tee bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /lib bench.txt
//
// Every benchmark name ends in lib=NAME, so benchstat's -col /lib puts the
// libraries of one setting in columns with the ratio to the first (lease).
// Besides ns/op each benchmark reports the median latency (p50-µs), the
// client's and the servers' CPU per operation (client-cpu-µs/op,
// server-cpu-µs/op). Nothing here is a test: docs/benchmarks.md holds the
// reading of a run, dated, next to the command that made it.
//
// `make bench` runs all of them; `make bench-scale` runs the 100-host scale
// scenario (BenchmarkScale).
package bench
