package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
)

// numberEcho replies {ARGV[1]} as an integer.
var numberEcho = core.NewScript("conformance-number-echo", "return {tonumber(ARGV[1])}")

// lateReplyChecks are the context group's check that a reply is for its own call: a call
// that its context ended while its reply was on its way leaves that late reply to no one.
func lateReplyChecks() []check {
	return []check{{"late-reply", checkLateReply}}
}

// lateDeadline is the first call's deadline in checkLateReply: long enough for its request
// to reach the proxy on a loaded machine (at ctxDeadline, 50 ms, it once did not), since
// the reply is held however long the call waits.
const lateDeadline = 10 * ctxDeadline

// checkLateReply: a proxy holds back the server's replies on the connection of a first
// Eval, whose context ends (lateDeadline) while its reply is held. A second Eval is then made, on
// whatever connection the Node chooses (the first's, if the Node kept it: a pipelining
// driver does), and the held replies are let through. The second must get its own reply,
// not the first's late one (the other context checks close the connection, so no late reply
// ever arrives).
func checkLateReply(t *testing.T, e *env) {
	e.skipOnCluster(t, "it holds the server's replies at a proxy, and a cluster client dials the addresses the cluster announces")
	px := startProxy(t, e.server(t))
	n := e.node(t, px.addr())
	defer px.close() // before the Node's cleanup
	keys := []string{core.NewKeys(prefix(t), "late").Lock}
	first, second := "1111111111111", "2222222222222" // each long enough for the proxy to watch
	mustEval(t, n, numberEcho, keys, "1")             // a connection, and the script on the server

	held := px.holdWhere(first)
	ctx, cancel := context.WithTimeout(context.Background(), lateDeadline)
	defer cancel()
	var got []int64
	var err error
	bound := lateDeadline + ctxBound
	if _, ok := withinBound(t, bound, px.release, func() { got, err = n.Eval(ctx, numberEcho, keys, first) }); !ok {
		t.Fatalf("Eval with a context with a deadline %v away, whose reply was held back, had not returned within %v: the Node must honour ctx", lateDeadline, bound)
	}
	select {
	case <-held:
	default:
		t.Fatalf("conformance: the first Eval (reply %s, error %v) never reached the proxy", format(got), err)
	}
	if err == nil {
		t.Fatalf("Eval with a context with a deadline %v away, whose reply was held back, returned %s and no error", ctxDeadline, format(got))
	}

	sent := px.watch(second)
	done := make(chan struct{})
	var got2 []int64
	var err2 error
	go func() {
		defer close(done)
		got2, err2 = evalWithin(3*waitBound, n, numberEcho, keys, second)
	}()
	select {
	case <-sent: // on the first's connection (held), or another
	case <-done:
	case <-time.After(slowReply): // a Node that waits for the late reply before it sends again
	}
	px.release()
	select {
	case <-done:
	case <-time.After(3 * waitBound):
		t.Fatalf("the Eval after one that timed out had not returned %v after the held replies were let through", 3*waitBound)
	}
	want := fmt.Sprint([]int64{2222222222222})
	switch {
	case err2 != nil:
		t.Errorf("the Eval after one whose context ended while its reply was on its way returned error %v, want its own reply %s", err2, want)
	case fmt.Sprint(got2) == fmt.Sprint([]int64{1111111111111}):
		t.Errorf("the Eval after one whose context ended while its reply was on its way replied %s, the late reply of that earlier call, want its own %s: a reply is for its own call; a Node that keeps the connection of a call that gave up must skip that call's reply (or close the connection)", format(got2), want)
	case fmt.Sprint(got2) != want:
		t.Errorf("the Eval after one that timed out replied %s, want %s", format(got2), want)
	}
}
