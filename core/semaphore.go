package core

import (
	"context"
	"strconv"
)

// A semaphore of K permits is K locks under one queue (see NewSemaphoreKeys): an
// acquisition takes the permit that a quorum granted it (or handed it over), the Redlock
// rule applied per permit, so at most K hold at once. A node grants one caller one permit
// at most: the one it holds already, if any.

// holdPermit makes l the holder of permit w, which a quorum granted it (or handed it over),
// permits being the permit each node gave it (-1: none); the nodes that gave w are l.holds.
// On every other node in others (a bit each) it lets go, in the background, of what it may
// hold there: another permit (which goes on to the first waiter there), and, for a waiter,
// its place in the queue, marked left, so that no later release hands it a permit there that
// would sit unused until its Release.
func (c *Cluster) holdPermit(l *claim, permits []int, w int, others uint64) {
	l.Keys = l.Keys.permit(w)
	timeout, k := l.NodeTimeout, strconv.Itoa(len(l.Keys.Permits))
	l.holds = 0
	for i, p := range permits {
		if p == w {
			l.holds |= bit(i)
		}
	}
	for i, p := range permits {
		if l.holds&bit(i) != 0 || others&bit(i) == 0 || (p < 0 && l.waiter == "") {
			continue
		}
		pk := l.Keys.permit(max(p, 0))
		req := request{s: releaseScript, keys: pk.releaseKeys(), op: "release", failed: l.NodeFailed,
			args: releaseArgs(l.token, l.Keys.Channel, l.waiter, "leave", "", "", k)}
		c.bg.goRun(3*timeout, func() { c.callNode(context.Background(), i, timeout, req) })
	}
}

// releaseArgs returns the release script's ARGV for l in mode ("leave", or "stay" to keep
// the waiter's place), with a semaphore's number of permits.
func (l *claim) releaseArgs(mode string) []string {
	k := len(l.Keys.Permits)
	switch {
	case mode == "stay" && k > 0:
		return releaseArgs(l.token, l.Keys.Channel, l.waiter, mode, strconv.FormatInt(l.ticket, 10), millis(l.placeKept()), strconv.Itoa(k))
	case mode == "stay":
		return releaseArgs(l.token, l.Keys.Channel, l.waiter, mode, strconv.FormatInt(l.ticket, 10), millis(l.placeKept()))
	case k > 0:
		return releaseArgs(l.token, l.Keys.Channel, l.waiter, mode, "", "", strconv.Itoa(k))
	}
	return releaseArgs(l.token, l.Keys.Channel, l.waiter, mode)
}
