package storeproc

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestStartStop starts each server, checks that it accepts connections on
// its address, stops it by PID and checks that the process and its
// directory are gone.
func TestStartStop(t *testing.T) {
	for name, start := range map[string]func(context.Context) (*Proc, error){
		"postgres": Postgres, "etcd": Etcd, "zookeeper": ZooKeeper,
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			c, err := net.DialTimeout("tcp", p.Addr, time.Second)
			if err != nil {
				t.Fatalf("dial %s: %v", p.Addr, err)
			}
			_ = c.Close()
			if p.Version == "" || p.Version == "unknown" {
				t.Errorf("no version")
			}
			pid, dir := p.PID(), p.dir
			if err := p.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Stop (kill 0: %v)", pid, err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s still exists after Stop", dir)
			}
		})
	}
}
