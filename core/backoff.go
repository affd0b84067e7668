package core

import (
	"math/rand/v2"
	"time"
)

// Backoff is the wait between acquisition attempts: it starts at Min, doubles each attempt
// up to Max, and is jittered to a random point in its upper half so that competing clients
// drift apart.
type Backoff struct {
	Min, Max time.Duration
}

// Delay returns the wait after the given attempt (0 for the first). If the lock is held and
// the holder can keep it at most holder longer (holder > 0), the wait is no longer than that.
func (b Backoff) Delay(attempt int, holder time.Duration) time.Duration {
	d := b.Min
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	if holder > 0 {
		d = min(d, holder)
	}
	return d
}
