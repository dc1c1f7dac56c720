package zookeeper

import "time"

// The test switches of testhooks.go, set only from here.

func setUnboundedConnect(b *Backend)              { b.test.unboundedConnect = true }
func setAcceptShortSession(b *Backend)            { b.test.acceptShortSession = true }
func setUnsafeSpan(b *Backend, d time.Duration)   { b.test.span = d }
func setHeldByHook(b *Backend, f func())          { b.test.heldBy = f }
func setClientNow(b *Backend, f func() time.Time) { b.test.clientNow = f }
func setTrustClientClock(b *Backend)              { b.test.trustClientClock = true }
func setNoSync(b *Backend)                        { b.test.noSync = true }
func setNoSpaceVersion(b *Backend)                { b.test.noSpaceVersion = true }
