package core

import _ "embed"

// The scripts core runs, one file each, each whole as Redis runs it: its header gives its
// KEYS, ARGV and replies. Only acquire (the take), extend and release write a lock key (see
// the package doc, Invariants); the queue's part of acquire and release may refuse and may
// wake, never grant.
var (
	//go:embed lua/acquire.lua
	acquireSource string
	//go:embed lua/extend.lua
	extendSource string
	//go:embed lua/release.lua
	releaseSource string
	//go:embed lua/proclaim.lua
	proclaimSource string
	//go:embed lua/leader.lua
	leaderSource string
	//go:embed lua/status.lua
	statusSource string

	acquireScript = NewScript("acquire", acquireSource)
	extendScript  = NewScript("extend", extendSource)
	releaseScript = NewScript("release", releaseSource)
	// An election's record of its leader's value (see Proclaim and Leader).
	proclaimScript = NewScript("proclaim", proclaimSource)
	leaderScript   = NewScript("leader", leaderSource)
	// A read of every key a name has (see Cluster.Status).
	statusScript = NewScript("status", statusSource)
)

// Scripts returns the scripts core runs, in the order acquire, extend, release, proclaim,
// leader, status: for a backend that preloads them (SCRIPT LOAD) and for tests of a
// backend.
func Scripts() []*Script {
	return []*Script{acquireScript, extendScript, releaseScript, proclaimScript, leaderScript, statusScript}
}
