package core

import (
	_ "embed"
	"strconv"
	"strings"
)

// The scripts that every lock operation runs: each file's header gives its KEYS, ARGV and
// replies. queue.lua is the prelude, the constants and functions shared by every script but
// proclaim and leader: it comes first, except that acquire and release run their first
// case between its head and its rest (below).
var (
	//go:embed lua/queue.lua
	preludeSource string
	//go:embed lua/acquire.lua
	acquireSource string
	//go:embed lua/extend.lua
	extendSource string
	//go:embed lua/release.lua
	releaseSource string
	//go:embed lua/rextend.lua
	rextendSource string
	//go:embed lua/proclaim.lua
	proclaimSource string
	//go:embed lua/leader.lua
	leaderSource string
	//go:embed lua/status.lua
	statusSource string

	// A writer's and a reader's scripts: acquire and rlock, release and runlock, are one
	// source each, with read false or true.
	acquireScript = NewScript("acquire", preludeAt(readAs(false)+acquireSource))
	extendScript  = NewScript("extend", preludeSource+extendSource)
	releaseScript = NewScript("release", preludeAt(readAs(false)+releaseSource))
	rlockScript   = NewScript("rlock", preludeAt(readAs(true)+acquireSource))
	rextendScript = NewScript("rextend", preludeSource+rextendSource)
	runlockScript = NewScript("runlock", preludeAt(readAs(true)+releaseSource))
	// An election's record of its leader's value (see Proclaim and Leader).
	proclaimScript = NewScript("proclaim", proclaimSource)
	leaderScript   = NewScript("leader", leaderSource)
	// A read of every key a name has (see Cluster.Status).
	statusScript = NewScript("status", statusSource)
)

// preludeMark is the line of acquire.lua and release.lua that the rest of the prelude
// replaces, and restMark the line of queue.lua where its rest begins: a script's first case,
// between them, returns before the rest's definitions are evaluated (a speed path).
const (
	preludeMark = "\n-- queue.lua: the rest of the prelude, put here by core/scripts.go\n"
	restMark    = "\n-- The rest of the prelude.\n"
)

// readAs returns the line that defines acquire.lua's and release.lua's read.
func readAs(read bool) string { return "local read = " + strconv.FormatBool(read) + "\n" }

// preludeAt returns src after the prelude's head, with the prelude's rest in place of its
// preludeMark line.
func preludeAt(src string) string {
	before, after, ok := strings.Cut(src, preludeMark)
	head, rest, ok2 := strings.Cut(preludeSource, restMark)
	if !ok || !ok2 {
		panic("core: a script or the prelude without its mark")
	}
	return head + "\n" + before + "\n" + rest + after
}

// lockScripts are the scripts that acquire, extend and release one kind of holding.
type lockScripts struct{ acquire, extend, release *Script }

var (
	writerScripts = lockScripts{acquireScript, extendScript, releaseScript}
	readerScripts = lockScripts{rlockScript, rextendScript, runlockScript}
)

// Scripts returns the scripts core runs, in the order acquire, extend, release, rlock,
// rextend, runlock, proclaim, leader, status: for a backend that preloads them (SCRIPT LOAD)
// and for tests of a backend.
func Scripts() []*Script {
	return []*Script{acquireScript, extendScript, releaseScript, rlockScript, rextendScript, runlockScript,
		proclaimScript, leaderScript, statusScript}
}
