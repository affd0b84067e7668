package core

import (
	"testing"
	"testing/synctest"
	"time"
)

// bubble runs f in a synctest bubble, where the clock moves only when every goroutine
// waits, so that a test's timing is exact. Once f and its cleanups are done, the clock runs
// on for a minute, for the calls its slow fake nodes still hold back to end: a bubble ends
// only once each of its goroutines has.
func bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(time.Minute) })
		f(t)
	})
}

// until waits in a bubble for cond, checking it each time every goroutine waits and moving
// the clock a millisecond at a time, up to limit, and returns how long it took (so that the
// test can assert the virtual time exactly).
func until(t *testing.T, limit time.Duration, cond func() bool, msgAndArgs ...any) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		synctest.Wait()
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			t.Fatalf("not within %v: %v", limit, msgAndArgs)
		}
		time.Sleep(time.Millisecond)
	}
}
