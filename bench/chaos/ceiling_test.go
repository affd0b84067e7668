package main

import (
	"testing"
	"time"
)

const milli = time.Millisecond

// TestMinHandOver: the quorum-th smallest round trip of the step in force, and 0 before
// the first step.
func TestMinHandOver(t *testing.T) {
	rtts := []rttSet{
		{at: 100 * milli, rtt: []time.Duration{0, 50 * milli, 20 * milli, 200 * milli, 10 * milli}},
		{at: 300 * milli, rtt: []time.Duration{0, 0, 0, 0, 0}},
	}
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{50 * milli, 0},
		{100 * milli, 20 * milli}, // sorted: 0, 10, 20, 50, 200
		{299 * milli, 20 * milli},
		{300 * milli, 0},
	} {
		if got := minHandOver(rtts, c.at, 3); got != c.want {
			t.Errorf("minHandOver at %v = %v, want %v", c.at, got, c.want)
		}
	}
}

// TestHandOverCeiling: held time over itself plus each gap cut to the least hand-over
// then; a gap shorter than that is kept; no delays, no ceiling.
func TestHandOverCeiling(t *testing.T) {
	ph := &phase{from: 0, to: 1000 * milli, rtts: []rttSet{{at: 0, rtt: []time.Duration{30 * milli, 30 * milli, 30 * milli, 0, 0}}}}
	gs := gapStats{spans: [][2]time.Duration{
		{0, 100 * milli},            // cut to 30 ms
		{500 * milli, 510 * milli},  // kept: 10 ms
		{800 * milli, 1000 * milli}, // cut to 30 ms
	}}
	held := 1000*milli - 310*milli
	want := float64(held) / float64(held+70*milli)
	if got := handOverCeiling(ph, gs, 3); got != want {
		t.Errorf("handOverCeiling = %v, want %v", got, want)
	}
	ph.rtts = nil
	if got := handOverCeiling(ph, gs, 3); got >= 0 {
		t.Errorf("handOverCeiling without delays = %v, want < 0", got)
	}
}
