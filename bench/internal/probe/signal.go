package probe

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// KillOnSignal calls kill and exits with status 130 when SIGINT or SIGTERM
// arrives and the command has not returned grace later (a case stuck
// somewhere: the command's own cleanup covers the normal and the error
// path). The returned stop ends the watch; call it (deferred) when the
// command returns.
func KillOnSignal(grace time.Duration, kill func()) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case <-sig:
			time.Sleep(grace)
			kill()
			os.Exit(130)
		case <-quit:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(quit)
	}
}
