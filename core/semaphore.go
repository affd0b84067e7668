package core

import (
	"context"
	"strconv"
)

// holdPermit makes l the holder of permit w, which a quorum granted it (or handed it over),
// permits being the permit each node gave it (-1: none); the nodes that gave w are l.holds.
// On every other node in others (a bit each) it sends release "leave", in the background,
// for what it may hold there: another permit, and a waiter's place in the queue, so that no
// later release hands it a permit there that would sit unused until its Release.
func (c *Cluster) holdPermit(l *claim, permits []int, w int, others uint64) {
	l.Keys = l.Keys.permit(w)
	l.holds = 0
	for i, p := range permits {
		if p == w {
			l.holds |= bit(i)
		}
	}
	timeout := l.NodeTimeout
	for i, p := range permits {
		if l.holds&bit(i) != 0 || others&bit(i) == 0 || (p < 0 && l.waiter == "") {
			continue
		}
		pk := l.Keys.permit(max(p, 0))
		req := request{s: releaseScript, keys: pk.releaseKeys(), args: l.releaseArgs("leave"), op: "release", failed: l.NodeFailed}
		c.bg.goRun(3*timeout, func() { c.callNode(context.Background(), i, timeout, req) })
	}
}

// releaseArgs returns the release script's ARGV for l in mode "leave", or "stay" to keep
// the waiter's place, with a semaphore's number of permits.
func (l *claim) releaseArgs(mode string) []string {
	var more [3]string // ticket and place's lifetime for "stay"; a semaphore's K
	n := 0
	if mode == "stay" {
		more[0], more[1], n = strconv.FormatInt(l.ticket, 10), millis(l.placeKept()), 2
	}
	if k := len(l.Keys.Permits); k > 0 {
		more[2], n = strconv.Itoa(k), 3
	}
	return releaseArgs(l.token, l.Keys.Channel, l.waiter, mode, more[:n]...)
}
