package core

import (
	"context"
	"strconv"
)

// A semaphore of K permits is K locks under one queue (see NewSemaphoreKeys): an
// acquisition takes the permit that a quorum granted it (or handed it over), the Redlock
// rule applied per permit, so at most K hold at once. A node grants one caller one permit
// at most: the one it holds already, if any.

// holdPermit makes l the holder of permit w, which a quorum granted it, and lets go, in the
// background, of the other permits that nodes granted it (permits, per node; -1: none):
// they go on to the first waiter there.
func (c *Cluster) holdPermit(l *claim, permits []int, w int) {
	l.Keys = l.Keys.permit(w)
	timeout := l.NodeTimeout
	for i, p := range permits {
		if p < 0 || p == w {
			continue
		}
		k := l.Keys.permit(p)
		req := request{s: releaseScript, keys: k.releaseKeys(), op: "release", failed: l.NodeFailed,
			args: releaseArgs(l.token, l.Keys.Channel, "", "leave", "", "", strconv.Itoa(len(l.Keys.Permits)))}
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
