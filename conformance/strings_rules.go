package conformance

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stringsRuleChecks are the strings group's checks that EvalStrings keeps the rest of
// Eval's contract, as the evalsha, resend and concurrency checks ask of Eval: EVALSHA once
// the server has the script, a script that failed is not sent again, and concurrent calls
// each get their own reply.
func stringsRuleChecks() []check {
	const calls = 5
	return []check{
		{"steady-state", func(t *testing.T, e *env) {
			if e.kind == Miniredis {
				t.Skip("conformance: miniredis has no INFO commandstats: checked on redis-server (strings/runs-once covers miniredis)")
			}
			addr := e.server(t)
			n := e.node(t, addr)
			key := core.NewKeys(prefix(t), "counting").Lock
			mustEvalStrings(t, n, counting, []string{key}) // the server has the script from here on
			adminAll(t, addr, "CONFIG", "RESETSTAT")
			for range calls {
				mustEvalStrings(t, n, counting, []string{key})
			}
			evalsha, eval := commandCalls(t, addr, "evalsha"), commandCalls(t, addr, "eval")
			assert.Zero(t, eval, "%d EvalStrings of a script the server has sent EVAL %d times: once the script is cached, EvalStrings must send EVALSHA with Script.SHA1(), as Eval does (EVAL only after NOSCRIPT)", calls, eval)
			assert.Equal(t, int64(calls), evalsha, "%d EvalStrings of a script the server has sent EVALSHA %d times, want one each", calls, evalsha)
		}},
		{"error-runs-once", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			key := core.NewKeys(prefix(t), "counting").Lock
			failing := core.NewScript("conformance-write-then-fail", "redis.call('INCR', KEYS[1]) return redis.error_reply('CONFORMANCE deliberate error after a write')")
			got, err := evalStrings(n, failing, []string{key})
			require.Error(t, err, "EvalStrings of a script that wrote and then replied with an error gave reply %q and no error", got)
			if r := runs(t, addr, key); r != 1 {
				t.Fatalf("a script that counts its runs and then replies with an error ran %d times for one EvalStrings (error %q): EvalStrings, as Eval, must not send a script that failed again: %s", r, err, resendRule)
			}
		}},
		{"concurrency/distinct", func(t *testing.T, e *env) {
			n := e.node(t, e.server(t))
			keys := []string{prefix(t)}
			errs := together(t, func(i int) error {
				want := []string{"goroutine-" + strconv.Itoa(i), strconv.Itoa(i * 7919)}
				ctx, cancel := context.WithTimeout(context.Background(), callBound)
				defer cancel()
				got, err := n.EvalStrings(ctx, echo, keys, want...)
				switch {
				case err != nil:
					return fmt.Errorf("error %v", err)
				case fmt.Sprint(got) != fmt.Sprint(want):
					return fmt.Errorf("replied %q, want %q (a reply meant for another caller?)", got, want)
				}
				return nil
			})
			failed := 0
			for i, err := range errs {
				if err != nil {
					if failed++; failed <= 3 {
						t.Errorf("goroutine %d of %d calling EvalStrings at once on one Node: %v: EvalStrings must be safe for concurrent use, each call getting its own reply", i, goroutines, err)
					}
				}
			}
			if failed > 3 {
				t.Errorf("and %d more of the %d goroutines failed", failed-3, goroutines)
			}
		}},
		{"concurrency/overlapping", checkStringsOverlapping},
	}
}

// checkStringsOverlapping: an EvalStrings called while another of the same Node waits for
// its reply (which a proxy holds back, on that call's connection only) gets its own reply,
// not an error: the Node may send it on another connection, pipeline it behind the first,
// or wait for the first.
func checkStringsOverlapping(t *testing.T, e *env) {
	e.skipOnCluster(t, "it holds the server's replies at a proxy, and a cluster client dials the addresses the cluster announces")
	addr := e.server(t)
	px := startProxy(t, addr)
	n := e.node(t, px.addr())
	defer px.close() // before the Node's cleanup
	keys := []string{prefix(t)}
	mustEvalStrings(t, n, echo, keys, "warm") // a connection, and the script on the server
	args := []string{"conformance-overlapping-first", "conformance-overlapping-second"}
	var got [2][]string
	var errs [2]error
	done := []chan struct{}{make(chan struct{}), make(chan struct{})}
	call := func(i int) {
		go func() {
			defer close(done[i])
			ctx, cancel := context.WithTimeout(context.Background(), 3*waitBound)
			defer cancel()
			got[i], errs[i] = n.EvalStrings(ctx, echo, keys, args[i])
		}()
	}
	firstSent, secondSent := px.holdWhere(args[0]), px.watch(args[1])
	call(0)
	select {
	case <-firstSent:
	case <-time.After(waitBound):
		t.Fatalf("conformance: the first EvalStrings never reached the proxy within %v", waitBound)
	}
	call(1)
	select {
	case <-secondSent: // on another connection, or pipelined behind the first
	case <-done[1]:
	case <-time.After(slowReply): // a Node that runs one call at a time: the second waits
	}
	select {
	case <-done[1]:
		if errs[1] != nil {
			px.release()
			t.Fatalf("EvalStrings called while another EvalStrings of the Node waited for its reply returned error %v (reply %q) before that reply came: a Node must be safe for concurrent use (the second call waits for a connection, pipelines, or opens one of its own)", errs[1], got[1])
		}
	default:
	}
	px.release()
	for i, want := range args {
		select {
		case <-done[i]:
		case <-time.After(3 * waitBound):
			t.Fatalf("EvalStrings %d of two at once had not returned %v after the server's replies were let through", i+1, 3*waitBound)
		}
		if errs[i] != nil {
			t.Errorf("EvalStrings %d of two at once (the first waiting for its reply when the second started) returned error %v: a Node must be safe for concurrent use", i+1, errs[i])
		} else if fmt.Sprint(got[i]) != fmt.Sprint([]string{want}) {
			t.Errorf("EvalStrings %d of two at once replied %q, want [%q]: each call must get its own reply", i+1, got[i], want)
		}
	}
}
