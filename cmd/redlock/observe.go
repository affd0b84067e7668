package main

import (
	"context"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-redlock/redlock"
)

// notObserving are the flags of `redlock elect` that have no meaning with -observe, which
// campaigns for nothing and runs no command.
var notObserving = []string{"value", "description", "wait", "timeout", "grace", "conflict-exit-code", "quiet"}

// observe is `redlock elect -observe NAME`: it writes the value of each new leader of the
// election NAME to stdout, one line each, starting with the current one, and an empty line
// when the election is left without a leader, until SIGINT, SIGTERM or SIGHUP (exit 0),
// or until reading the leader fails for good (exitUnavailable).
func (r *runner) observe(stdout io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	r.nodes = newNodes(r.addrs)
	defer r.nodes.close()
	client, err := redlock.New(r.nodes.nodes, r.options(warnLogger(r.stderr, r.cause), nil)...)
	if err != nil {
		r.usage(err)
		return exitUsage
	}
	r.client = client
	defer r.closeClient()
	r.nodes.connect(ctx)
	if ctx.Err() == nil {
		if err := r.nodes.failures(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				r.say("%s (observing on)", line)
			}
		}
	}
	for value := range client.NewElection(r.name).Observe(ctx) {
		if _, err := io.WriteString(stdout, value+"\n"); err != nil {
			return 0 // nobody reads: nothing left to do
		}
	}
	if ctx.Err() != nil {
		return 0
	}
	r.say("stopped observing election %q: reading its leader failed for good", r.name)
	return exitUnavailable
}
