package sqllease

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasecron/leasecron/lease"
)

// ReconnectAttempts is how many times a statement is sent, on a fresh
// connection each time, when the connection it used turned out dead.
const ReconnectAttempts = 3

// PermanentError marks an error that retrying cannot cure (a missing
// privilege, a foreign table); its text is the wrapped error's.
type PermanentError struct{ error }

// Unwrap returns the marked error.
func (e PermanentError) Unwrap() error { return e.error }

// Permanentf is fmt.Errorf marked permanent (a PermanentError).
func Permanentf(format string, args ...any) error {
	return PermanentError{fmt.Errorf(format, args...)}
}

// IsPermanent reports whether err was marked permanent (Permanentf). A
// driver adds the server errors its server says no retry cures.
func IsPermanent(err error) bool {
	var pm PermanentError
	return errors.As(err, &pm)
}

// ConnectionLost reports whether err is worth a retry on a fresh
// connection: anything but an error permanent says no retry cures, the
// end of ctx, or a closed backend. Every statement of the SQL drivers may
// be sent twice (an acquisition retried with the same token re-enters its
// own grant).
func ConnectionLost(err error, permanent func(error) bool) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrClosed) {
		return false
	}
	return !permanent(err)
}

// NodeErr returns err as a *lease.NodeError naming server, unless it
// already is one.
func NodeErr(server string, err error) error {
	var ne *lease.NodeError
	if errors.As(err, &ne) {
		return err
	}
	return &lease.NodeError{Node: server, Err: err}
}

// Scrubbed returns err, or, when msg (err's text with the password
// scrubbed out by the driver) differs from err's text, a *lease.NodeError
// naming server with msg as its text: an error never quotes a password.
func Scrubbed(server string, err error, msg string) error {
	if msg != err.Error() {
		return &lease.NodeError{Node: server, Err: errors.New(msg)}
	}
	return err
}
