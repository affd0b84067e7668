package core

import (
	_ "embed"
	"strings"
)

// The scripts that every lock operation runs; see the comments at the top of each file.
var (
	//go:embed lua/acquire.lua
	acquireSource string
	//go:embed lua/extend.lua
	extendSource string
	//go:embed lua/release.lua
	releaseSource string
	//go:embed lua/raise.lua
	raiseSource string
	// queue.lua holds the waiter queue's functions that acquire and release both use.
	//go:embed lua/queue.lua
	queueSource string

	acquireScript = NewScript("acquire", withQueue(acquireSource))
	extendScript  = NewScript("extend", extendSource)
	releaseScript = NewScript("release", withQueue(releaseSource))
	raiseScript   = NewScript("raise", raiseSource)
)

// Scripts returns the scripts core runs, in the order acquire, extend, release, raise: for
// a backend that preloads them (SCRIPT LOAD) and for tests of a backend.
func Scripts() []*Script {
	return []*Script{acquireScript, extendScript, releaseScript, raiseScript}
}

// queueLine is the line of acquire.lua and release.lua that queue.lua takes the place of:
// release runs its uncontended case before it, sparing that case the definitions.
const queueLine = "\n-- queue.lua\n"

// withQueue returns src with queue.lua in place of its queueLine.
func withQueue(src string) string {
	return strings.Replace(src, queueLine, "\n"+queueSource, 1)
}
