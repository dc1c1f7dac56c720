package lease

import (
	"crypto/rand"
	"encoding/hex"
)

// tokenBytes is the size of a token: 128 random bits.
const tokenBytes = 16

// NewToken returns a fresh random token identifying one acquisition: 128
// bits from crypto/rand, in hex (32 characters). Every driver stores it
// with the lease and guards each later operation (extend, release,
// complete) by it.
func NewToken() string { return NewTokens(1)[0] }

// NewTokens returns n fresh tokens (see NewToken), made from one read of
// the random source. They share one backing string: a holder that keeps
// one of them beyond the batch should strings.Clone it.
func NewTokens(n int) []string {
	raw := make([]byte, tokenBytes*n)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	all := hex.EncodeToString(raw)
	out := make([]string, n)
	for i := range out {
		out[i] = all[2*tokenBytes*i : 2*tokenBytes*(i+1)]
	}
	return out
}
