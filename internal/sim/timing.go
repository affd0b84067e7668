package sim

import (
	"math/rand/v2"
	"time"
)

// timing is a run's lock timing, drawn from its seed within what the README allows (a TTL
// of at least 1 ms, more than the drift allowance; a restart guard in whole seconds, at least
// the TTL), so that a defect that only a tight guard or a long holding shows meets some
// seeds: with a guard twice the TTL, a guard that abstains for half its time still outlasts
// every key a crash lost.
type timing struct {
	ttl   time.Duration // WithTTL
	guard time.Duration // WithRestartGuard, at every N
	step  time.Duration // the longest step of a holding, which lasts 1 to 3 steps
}

// drawTiming draws a run's timing from rng: a third of the runs keep a TTL of 1 s, the
// others draw it from 1 to 3 s; the guard is the TTL rounded up to whole seconds (at least
// 2 s, the least the fencing tokens of runs without clock offsets need), a second more in a
// quarter of the runs; a step is 100 ms in half the runs, else up to a TTL, so that
// holdings outlive their validity, and rely on their extensions.
func drawTiming(rng *rand.Rand) timing {
	t := timing{ttl: time.Second, step: 100 * time.Millisecond}
	if rng.IntN(3) != 0 {
		t.ttl = time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))/time.Millisecond*time.Millisecond
	}
	t.guard = max(2*time.Second, (t.ttl+time.Second-1)/time.Second*time.Second)
	if rng.IntN(4) == 0 {
		t.guard += time.Second
	}
	if rng.IntN(2) == 0 {
		t.step = 100*time.Millisecond + time.Duration(rng.Int64N(int64(t.ttl)))
	}
	return t
}
