package etcd

import "time"

// SetUnsafeValidityBonus makes b overstate every validity by d: the
// negative control of the tests' interval check (a client that trusts
// more time than the server grants).
func SetUnsafeValidityBonus(b *Backend, d time.Duration) { b.unsafeBonus = d }
