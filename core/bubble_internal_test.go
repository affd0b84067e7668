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
