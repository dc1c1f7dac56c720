package scheduler

import (
	"errors"
	"log/slog"
	"syscall"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
)

// terminateRetry is how long after a Terminate that failed watchRun asks
// the supervisor again to stop the job. The tries have no limit: each is
// bounded by the control pipe's write timeout (100ms), and they end with
// the run — once one succeeds, the supervisor is gone (Wait then kills
// the job's group) or the job ended. Until then nothing else stops a job
// for its timeout, shutdown or pause --stop; its lease stays safe all
// the same, as the supervisor kills the job at its deadline.
const terminateRetry = time.Second

// askStop asks proc's supervisor to stop the job (SIGTERM, SIGKILL after
// grace); try counts the asks of this run, from 1. It reports whether to
// ask again: the request did not reach a supervisor that may still be
// there (its control pipe timed out: it is stopped, or too slow to read).
func askStop(proc *supervisor.Process, grace time.Duration, try int, log *slog.Logger) (again bool) {
	switch err := proc.Terminate(grace); {
	case err == nil:
		if try > 1 {
			log.Warn("the supervisor took the request to stop the job", "tries", try)
		}
		return false
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, supervisor.ErrClosed):
		// The supervisor is gone: the job just ended, or the
		// supervisor died, and then Wait kills the job's group.
		log.Debug("supervisor already gone; not asked to stop the job", "err", err)
		return false
	case try == 1:
		log.Warn("could not ask the supervisor to stop the job; asking again", "every", terminateRetry, "err", err)
	default:
		log.Debug("could not ask the supervisor to stop the job", "tries", try, "err", err)
	}
	return true
}
