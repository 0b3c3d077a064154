package postgres

import (
	"time"

	"github.com/novox/postgres-provider/adapters/postgres/scram"
)

// Derivations counts the PBKDF2 derivations b ran to verify stored passwords.
func (b *Backend) Derivations() int {
	b.verified.mu.Lock()
	defer b.verified.mu.Unlock()
	return b.verified.derivations
}

// Verifier is the SCRAM-SHA-256 verifier PostgreSQL would store for password with the given
// salt and iterations, for tests that make many roles fast.
func Verifier(password string, salt []byte, iterations int) string {
	v, _ := scram.SaltedVerifier(password, salt, iterations)
	return v
}

// TakeSlots takes every one of b's slots for connections to consumers' databases, as creates
// running at once would, and answers how to give them back.
func (b *Backend) TakeSlots() (release func()) {
	for range cap(b.conns.slots) {
		b.conns.slots <- struct{}{}
	}
	return func() {
		for range cap(b.conns.slots) {
			<-b.conns.slots
		}
	}
}

// SizesRead is how many databases Usage has sized.
func (b *Backend) SizesRead() int {
	b.sizes.mu.Lock()
	defer b.sizes.mu.Unlock()
	return b.sizes.read
}

// SetSizesFresh sets how long a size is taken as last read while nothing was written, and
// gives back a function that restores it.
func SetSizesFresh(d time.Duration) (restore func()) {
	was := sizesFresh
	sizesFresh = d
	return func() { sizesFresh = was }
}

// OfferStamps is how many times b's creates read the stamp of what the server offers.
func (b *Backend) OfferStamps() int {
	b.ext.offered.mu.Lock()
	defer b.ext.offered.mu.Unlock()
	return b.ext.offered.stamps
}

// SetOfferClock sets the clock by which b's creates judge whether a stamp read still serves.
func (b *Backend) SetOfferClock(now func() time.Time) {
	b.ext.offered.mu.Lock()
	defer b.ext.offered.mu.Unlock()
	b.ext.offered.now = now
}

// OfferReads is how many times b's creates read all the server offers of every extension.
func (b *Backend) OfferReads() int {
	b.ext.offered.mu.Lock()
	defer b.ext.offered.mu.Unlock()
	return b.ext.offered.reads
}
