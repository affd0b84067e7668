package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
)

// behindChecks are the context group's check that a call waiting behind others in the
// Node (for a connection of a pool, a turn of a limiter, a lock around one connection)
// still ends at its context's deadline: the other context checks make one call at a time.
func behindChecks() []check {
	return []check{{"deadline/behind-others", checkBehindOthers}}
}

// blockerToken is the token the blocking calls of checkBehindOthers pass, for the proxy to
// see them arrive.
const blockerToken = "conformance-behind-others-blocker"

// checkBehindOthers: against a server that accepts and never replies (a frozen proxy), 100
// Evals with long contexts are under way (one reached the server, and all have started),
// more than a pool of connections holds; then an Eval with a deadline 50 ms away must
// return within 1 s of it, with an error, though it waits behind them.
func checkBehindOthers(t *testing.T, e *env) {
	e.skipOnCluster(t, "it sees at a proxy when the calls reach the server, and a cluster client dials the addresses the cluster announces")
	px := startProxy(t, e.server(t))
	n := e.node(t, px.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitBound) // the blockers'
	defer cancel()
	unblock := func() { cancel(); px.close() }
	defer unblock() // before the Node's cleanup
	s := script(t, "extend")
	keys := extendKeys(core.NewKeys(prefix(t), "behind"))
	mustEval(t, n, s, keys, ours, ttl, "w") // a connection, and the script on the server
	reached := px.watch(blockerToken)
	px.freeze()

	var started, returned sync.WaitGroup
	for range goroutines {
		started.Add(1)
		returned.Add(1)
		go func() {
			defer returned.Done()
			started.Done()
			_, _ = n.Eval(ctx, s, keys, blockerToken, ttl, "w")
		}()
	}
	started.Wait()
	select {
	case <-reached:
	case <-time.After(waitBound):
		t.Fatalf("conformance: none of %d Evals reached the proxy within %v", goroutines, waitBound)
	}

	probe, cancelProbe := context.WithTimeout(context.Background(), ctxDeadline)
	defer cancelProbe()
	var got []int64
	var err error
	bound := ctxDeadline + ctxBound
	elapsed, ok := withinBound(t, bound, unblock, func() { got, err = n.Eval(probe, s, keys, ours, ttl) })
	if !ok {
		t.Fatalf("Eval with a context with a deadline %v away, made while %d Evals of the Node waited for a server that never replies, had not returned within %v (it did %v later, once the suite closed the connections and cancelled the others): a call waiting behind others in the Node (for a connection of its pool, a turn of a limiter, a lock) must still end at its context's deadline", ctxDeadline, goroutines, bound, (elapsed - bound).Round(time.Millisecond))
	}
	if err == nil {
		t.Fatalf("Eval with a context with a deadline %v away, behind %d Evals waiting for a server that never replies, returned %s and no error after %v", ctxDeadline, goroutines, format(got), elapsed.Round(time.Millisecond))
	}
	t.Logf("Eval behind %d others returned after %v: %v", goroutines, elapsed.Round(time.Millisecond), err)
	unblock()
	waited := make(chan struct{})
	go func() { returned.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(waitBound):
		t.Errorf("%v after their context was cancelled and their connections closed, some of the %d Evals had not returned: the Node must honour ctx", waitBound, goroutines)
	}
}
