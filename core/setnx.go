package core

import (
	"context"
	"time"
)

// Setter is an optional capability of a Node: a plain SET, without a script. Core takes a
// lock with it, as SET key token NX PX ttl, on AcquireWait's first attempt where the Lock
// asks for neither the restart guard nor a fencing token and is not Contended. A Node
// without it runs the acquire script instead. A wrapper that embeds a backend's Node to
// change what Eval sends (key prefixes, say) gets the embedded SetNX too: it must wrap
// SetNX alike, or hide it.
type Setter interface {
	// SetNX runs SET key value NX PX ttl (ttl is a whole number of milliseconds, at least
	// 1) and reports whether it set key: false if key exists, which it leaves as it was.
	// A ttl under 1ms is an error, never a key without expiry. It honours ctx as Eval
	// does. A transport or server error is returned as an error.
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
}

// plain reports whether this attempt of l may be a plain SET NX (see Setter).
func (l *claim) plain() bool {
	return l.attempt == 1 && l.Keys.Permits == nil && l.Keys.Set == nil && !l.Contended && !l.Read && l.Guard <= 0 && !l.Fence && l.TTL >= time.Millisecond
}

// setNX sends req's plain SET NX to node n, and returns its answer as the acquire script
// would: {1, 0} if it set the key, {0, 0} if the key was there.
func setNX(ctx context.Context, n Setter, req *request) ([]int64, error) {
	set, err := n.SetNX(ctx, req.key, req.value, req.ttl)
	if set {
		return setReplies[1], err
	}
	return setReplies[0], err
}

// setReplies are setNX's two answers, shared by every call: never written.
var setReplies = [2][]int64{{0, 0}, {1, 0}}
