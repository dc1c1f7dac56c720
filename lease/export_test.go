package lease

// RenewAfterReturn makes a Hold time each renewal from when the previous
// Extend returned, as it did before renewals were timed from the validity:
// the negative control of the renewal-timing tests.
func RenewAfterReturn() HoldOption { return func(o *holdOptions) { o.afterReturn = true } }
