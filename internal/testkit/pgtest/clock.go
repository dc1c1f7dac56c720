package pgtest

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Option configures a server started by Start.
type Option func(*Server)

// WithClockStep runs the server with a wall clock StepClock can step: a
// small LD_PRELOAD library (built with the system's C compiler) adds an
// offset, read from a shared file, to every CLOCK_REALTIME reading of the
// postmaster and its backends (clock_gettime, gettimeofday, time), so
// clock_timestamp() and now() jump as after an NTP step or a failover to a
// server whose clock is ahead. Without a C compiler the test fails.
func WithClockStep() Option { return func(s *Server) { s.clockStep = true } }

// WithMaxConnections sets the server's max_connections (default 60).
func WithMaxConnections(n int) Option { return func(s *Server) { s.maxConns = n } }

// clockShim is the LD_PRELOAD library of WithClockStep. The offset file
// holds one int64 (nanoseconds, native byte order), mapped shared so a
// write to it takes effect at once.
const clockShim = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *off;
static int (*real_cg)(clockid_t, struct timespec *);
static int (*real_gtod)(struct timeval *, void *);

static void init(void) {
	if (!real_cg) real_cg = dlsym(RTLD_NEXT, "clock_gettime");
	if (!real_gtod) real_gtod = dlsym(RTLD_NEXT, "gettimeofday");
	if (!off) {
		const char *p = getenv("PGTEST_CLOCK_OFFSET_FILE");
		int fd = p ? open(p, O_RDONLY) : -1;
		if (fd >= 0) {
			void *m = mmap(0, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
			close(fd);
			if (m != MAP_FAILED) off = m;
		}
	}
}

int clock_gettime(clockid_t c, struct timespec *ts) {
	init();
	int r = real_cg(c, ts);
	if (r == 0 && off && (c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE)) {
		int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + *off;
		ts->tv_sec = ns / 1000000000;
		ts->tv_nsec = ns % 1000000000;
	}
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	init();
	int r = real_gtod(tv, tz);
	if (r == 0 && off && tv) {
		int64_t us = (int64_t)tv->tv_sec * 1000000 + tv->tv_usec + *off / 1000;
		tv->tv_sec = us / 1000000;
		tv->tv_usec = us % 1000000;
	}
	return r;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
`

// buildClockShim compiles the shim into s.dir and creates the offset file
// (zero: the true time).
func (s *Server) buildClockShim() error {
	src := filepath.Join(s.dir, "clockshim.c")
	if err := os.WriteFile(src, []byte(clockShim), 0o644); err != nil {
		return err
	}
	so := filepath.Join(s.dir, "clockshim.so")
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl").CombinedOutput(); err != nil {
		return fmt.Errorf("building the clock shim (WithClockStep needs a C compiler: apt-get install gcc): %w\n%s", err, out)
	}
	if err := os.Chmod(so, 0o755); err != nil {
		return err
	}
	s.clockFile = filepath.Join(s.dir, "clock-offset")
	return s.writeOffset(0)
}

func (s *Server) writeOffset(d time.Duration) error {
	b := binary.NativeEndian.AppendUint64(nil, uint64(int64(d)))
	f, err := os.OpenFile(s.clockFile, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(b, 0)
	return err
}

// clockEnv is the environment that makes the server use the shim.
func (s *Server) clockEnv() []string {
	if s.clockFile == "" {
		return nil
	}
	return []string{"LD_PRELOAD=" + filepath.Join(s.dir, "clockshim.so"), "PGTEST_CLOCK_OFFSET_FILE=" + s.clockFile}
}

// StepClock sets the server's wall clock to the true time plus offset
// (0: back to the true time), at once, for the postmaster and every
// backend. The server must have been started WithClockStep.
func (s *Server) StepClock(offset time.Duration) {
	s.t.Helper()
	if s.clockFile == "" {
		s.t.Fatalf("pgtest: StepClock on a server started without WithClockStep")
	}
	if err := s.writeOffset(offset); err != nil {
		s.t.Fatalf("pgtest: stepping the clock: %v", err)
	}
}
