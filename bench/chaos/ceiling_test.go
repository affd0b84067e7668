package main

import (
	"testing"
	"time"
)

const milli = time.Millisecond

// TestLeastGap: the quorum-th smallest round trip of a step in force during the gap, from
// the later of the gap's start and the step's; steps whose quorum-th round trip reaches the
// node timeout count for nothing; the first step counts from the phase's start; a gap in
// which no step allowed a hand-over keeps its length.
func TestLeastGap(t *testing.T) {
	rtts := []rttSet{
		{at: 1 * milli, rtt: []time.Duration{0, 50 * milli, 20 * milli, 200 * milli, 10 * milli}}, // quorum-th: 20
		{at: 300 * milli, rtt: []time.Duration{0, 0, 0, 0, 0}},                                    // 0
		{at: 500 * milli, rtt: []time.Duration{150 * milli, 150 * milli, 150 * milli, 0, 0}},      // 150: past the timeout
		{at: 900 * milli, rtt: []time.Duration{30 * milli, 30 * milli, 30 * milli, 0, 0}},         // 30
	}
	for _, c := range []struct {
		start, end time.Duration
		want       time.Duration
	}{
		{0, 100 * milli, 20 * milli},             // the first step from the phase's start
		{100 * milli, 110 * milli, 10 * milli},   // shorter than the least: kept
		{250 * milli, 400 * milli, 20 * milli},   // the step in force at its start
		{310 * milli, 400 * milli, 0},            // within it
		{600 * milli, 800 * milli, 200 * milli},  // no lock can be taken: the whole gap
		{600 * milli, 1000 * milli, 330 * milli}, // until 900, then 30
		{300 * milli, 300*milli + 1, 0},          // a step that starts at the gap's start
	} {
		if got := leastGap(rtts, c.start, c.end, 3, 100*milli); got != c.want {
			t.Errorf("leastGap(%v, %v) = %v, want %v", c.start, c.end, got, c.want)
		}
	}
}

// TestHandOverCeiling: held time over itself plus each gap cut to the least hand-over
// then; a gap shorter than that is kept; no delays, no ceiling.
func TestHandOverCeiling(t *testing.T) {
	ph := &phase{from: 0, to: 1000 * milli, nodeTimeout: 100 * milli, rtts: []rttSet{{at: 0, rtt: []time.Duration{30 * milli, 30 * milli, 30 * milli, 0, 0}}}}
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
