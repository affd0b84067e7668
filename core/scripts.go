package core

import _ "embed"

// The scripts that every lock operation runs; see the comments at the top of each file.
var (
	//go:embed lua/acquire.lua
	acquireSource string
	//go:embed lua/extend.lua
	extendSource string
	//go:embed lua/release_uncontended.lua
	releaseUncontendedSource string
	//go:embed lua/release.lua
	releaseSource string
	//go:embed lua/raise.lua
	raiseSource string
	//go:embed lua/rlock.lua
	rlockSource string
	//go:embed lua/rextend.lua
	rextendSource string
	//go:embed lua/runlock.lua
	runlockSource string
	//go:embed lua/permits.lua
	permitsSource string
	//go:embed lua/proclaim.lua
	proclaimSource string
	//go:embed lua/leader.lua
	leaderSource string
	// queue.lua is the prelude of acquire, release, raise, the readers' scripts and permits:
	// the constants, the waiter queue's functions, the restart guard and the fence counter.
	//go:embed lua/queue.lua
	queueSource string

	acquireScript = NewScript("acquire", queueSource+acquireSource)
	extendScript  = NewScript("extend", extendSource)
	// release's uncontended case comes first: it returns before the prelude's definitions.
	releaseScript = NewScript("release", releaseUncontendedSource+queueSource+releaseSource)
	raiseScript   = NewScript("raise", queueSource+raiseSource) // for fence_idle
	// A reader's: rlock and runlock share the prelude, and runlock ends as release does.
	rlockScript   = NewScript("rlock", queueSource+rlockSource)
	rextendScript = NewScript("rextend", rextendSource)
	runlockScript = NewScript("runlock", queueSource+runlockSource)
	// A semaphore's record of its number of permits (see Permits).
	permitsScript = NewScript("permits", queueSource+permitsSource)
	// An election's record of its leader's value (see Proclaim and Leader).
	proclaimScript = NewScript("proclaim", proclaimSource)
	leaderScript   = NewScript("leader", leaderSource)
)

// lockScripts are the scripts that acquire, extend and release one kind of holding.
type lockScripts struct{ acquire, extend, release *Script }

var (
	writerScripts = lockScripts{acquireScript, extendScript, releaseScript}
	readerScripts = lockScripts{rlockScript, rextendScript, runlockScript}
)

// Scripts returns the scripts core runs, in the order acquire, extend, release, raise,
// rlock, rextend, runlock, permits, proclaim, leader: for a backend that preloads them
// (SCRIPT LOAD) and for tests of a backend.
func Scripts() []*Script {
	return []*Script{acquireScript, extendScript, releaseScript, raiseScript, rlockScript, rextendScript, runlockScript,
		permitsScript, proclaimScript, leaderScript}
}
