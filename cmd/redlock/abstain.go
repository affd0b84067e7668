package main

import (
	"regexp"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
)

// abstentions is the Observer that says, at once, that a node abstains under the restart
// guard: the first time each node does, so that a wait for freshly started servers is
// never silent. Its say writes one line to redlock's standard error. It is safe for
// concurrent use, as an Observer must be.
type abstentions struct {
	redlock.NopObserver
	guard   time.Duration // -restart-guard
	waiting bool          // redlock waits (no -nonblock): the line says so
	say     func(format string, args ...any)

	mu   sync.Mutex
	seen map[string]bool // the nodes said so already
}

// forAnother finds the time left of an abstention in the node's error ("... for another
// 29s").
var forAnother = regexp.MustCompile(`for another (\S+)`)

// NodeError says that ev's node abstains, the first time it does.
func (a *abstentions) NodeError(ev redlock.NodeEvent) {
	if !ev.Abstained {
		return
	}
	a.mu.Lock()
	first := !a.seen[ev.Node]
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	a.seen[ev.Node] = true
	a.mu.Unlock()
	if !first {
		return
	}
	left := ""
	if m := forAnother.FindStringSubmatch(ev.Err.Error()); m != nil {
		left = " for another " + m[1]
	}
	then := ""
	if a.waiting {
		then = "; waiting for it"
	}
	a.say("node %s abstains%s under the restart guard: its server has been up for less than -restart-guard %v, and a restart may have made it forget its locks%s",
		ev.Node, left, a.guard, then)
}
