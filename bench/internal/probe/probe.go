// Package probe holds what the measuring commands of bench/cmd share: a
// throwaway redis-server, go-redis clients configured as lease configures
// its own, CPU and allocation counters read around a loop (perfprobe,
// c16probe), and killing the servers on a signal when a run is stuck
// (leasebench, scalebench).
package probe

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// StartRedis starts redis-server on 127.0.0.1:port without persistence and
// waits until it is old enough for lease's 1 s restart guard. The server
// dies with this process (also when it is killed); stop it earlier by
// killing the returned command's PID.
func StartRedis(port string) (*exec.Cmd, error) {
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server on port %s: %w", port, err)
	}
	time.Sleep(3500 * time.Millisecond)
	return cmd, nil
}

// NewClient returns a go-redis client for addr configured exactly as lease
// configures its own (lease/node.go, tuneOptions): RESP2, no CLIENT
// SETINFO, no maintenance notifications, no retries, 10 s read and write
// timeouts, a 5 s dial timeout and go-redis's default pool size. Every
// library and floor the benchmarks compare uses it, so that their ratios
// are those of their algorithms, not of their client settings (with
// go-redis's defaults, RESP3 adds a push-notification check with a
// non-blocking read to every command).
func NewClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, DialTimeout: 5 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// Counters are this process's CPU time, the server's CPU time and the Go
// allocations at one moment.
type Counters struct {
	at, self, server time.Duration
	mallocs, bytes   uint64
}

// Read takes the counters now; admin is a client of the server measured.
func Read(ctx context.Context, admin *redis.Client) Counters {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Counters{
		at:      time.Duration(time.Now().UnixNano()),
		self:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		server:  serverCPU(ctx, admin),
		mallocs: ms.Mallocs,
		bytes:   ms.TotalAlloc,
	}
}

// serverCPU is the redis-server's user and system CPU time (INFO cpu).
func serverCPU(ctx context.Context, c *redis.Client) time.Duration {
	var t float64
	for _, line := range strings.Split(c.Info(ctx, "cpu").Val(), "\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				t += x
			}
		}
	}
	return time.Duration(t * float64(time.Second))
}

// PerOp formats what n operations between before and after cost each:
// wall time, client CPU, server CPU, allocations and bytes allocated.
func PerOp(before, after Counters, n int) string {
	f := float64(n)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / f }
	return fmt.Sprintf("%.1f µs/op wall, client CPU %.1f µs/op, Redis CPU %.1f µs/op, %d allocs/op, %d B/op",
		us(after.at-before.at), us(after.self-before.self), us(after.server-before.server),
		(after.mallocs-before.mallocs)/uint64(n), (after.bytes-before.bytes)/uint64(n))
}

// Rate formats n operations over d wall time with their CPU per operation
// and how many cores the client and the server kept busy together.
func Rate(before, after Counters, n int) string {
	wall := after.at - before.at
	busy := (after.self - before.self) + (after.server - before.server)
	f := float64(n)
	return fmt.Sprintf("%.0f ops/s, client CPU %.1f µs/op, Redis CPU %.1f µs/op, cores busy %.2f",
		f/wall.Seconds(), float64((after.self-before.self).Microseconds())/f,
		float64((after.server-before.server).Microseconds())/f, busy.Seconds()/wall.Seconds())
}

// Batch formats what one batch of n keys between before and after cost in
// all: wall time, client CPU, server CPU, allocations per key and MiB
// allocated.
func Batch(before, after Counters, n int) string {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("%.1f ms wall, client CPU %.1f ms, Redis CPU %.1f ms, %d allocs/key, %.1f MiB",
		ms(after.at-before.at), ms(after.self-before.self), ms(after.server-before.server),
		(after.mallocs-before.mallocs)/uint64(n), float64(after.bytes-before.bytes)/(1<<20))
}

// CommandStat is one line of INFO commandstats: how often the server ran a
// command and how many µs those calls took. Redis measures that as wall
// time around each call: a server that loses its core in the middle of a
// script counts the wait, so on a busy machine it can exceed the server's
// CPU. Commands called inside a script are counted on their own as well
// as in the script's time.
type CommandStat struct {
	Calls int64
	Usec  int64
}

// CommandStats reads INFO commandstats of the server admin is a client of,
// keyed by command name (lower case; "evalsha", "set", ...). Reset them
// with CONFIG RESETSTAT before the loop measured.
func CommandStats(ctx context.Context, admin *redis.Client) (map[string]CommandStat, error) {
	s, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats on %s: %w", admin.Options().Addr, err)
	}
	out := map[string]CommandStat{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var cs CommandStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				cs.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				cs.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[name] = cs
	}
	return out, nil
}

// FormatCommandStats formats stats (read after n operations, from a
// reset) as calls and µs per operation for each command, most costly
// first, e.g. "evalsha 2.00 calls 41.3 µs, set 1.00 calls 1.2 µs"
// (µs in all per operation, not per call). Commands named in skip, and
// those run less than once per 1,000 operations, are left out.
func FormatCommandStats(stats map[string]CommandStat, n int, skip ...string) string {
	type row struct {
		name string
		s    CommandStat
	}
	var rows []row
	for name, s := range stats {
		if !slices.Contains(skip, name) && s.Calls*1000 >= int64(n) {
			rows = append(rows, row{name, s})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.s.Usec, a.s.Usec) })
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %.2f calls %.1f µs", r.name, float64(r.s.Calls)/float64(n), float64(r.s.Usec)/float64(n)))
	}
	return strings.Join(parts, ", ")
}
