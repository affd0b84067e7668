// Package conformance is the test suite every core.Node must pass: the three backends of
// this module run it, and so can a backend of your own, with one call from a test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewNode: func(t testing.TB, addr string) core.Node {
//				client := mydriver.Dial(addr)
//				t.Cleanup(func() { client.Close() })
//				return mybackend.New(client)
//			},
//		})
//	}
//
// Run starts its own servers on 127.0.0.1: miniredis in-process always, and real
// redis-server processes when the binary is on PATH (those checks skip, saying so,
// otherwise). Each check gets fresh servers of its own. The suite prepares and inspects the
// servers through its own small RESP client, never through the Node under test, and makes a
// server "accept and never reply" (or drop its connections) with a TCP proxy in front of
// it, so that a driver that connects eagerly can be checked as well as a lazy one.
//
// The checks, each a subtest named "<server>/<group>/<check>":
//
//   - scripts: every core script through Node.Eval, with the reply and the effect on the
//     server checked: acquire of a free lock, of a held one, retried with our own token, and
//     the fence counter advancing exactly past 2^32; extend of our lock, another's, a
//     missing one; release of ours (deleted, and published on the release channel), of
//     another's, of a missing one; raise of ours, never lowering, of another's.
//   - noscript: each script right after SCRIPT FLUSH, three times: Eval falls back from
//     EVALSHA to EVAL.
//   - errors: a server error (WRONGTYPE, redis.error_reply) is an error that keeps the
//     server's message, with no reply; so is a reply that is not an array of integers.
//   - context: against a server that accepts and never replies, Eval returns within 1 s of
//     a 50 ms deadline with an error, within 1 s of a cancellation with an error matching
//     context.Canceled, and as soon for an already cancelled context; on a connection
//     opened before the server stopped answering and on a new one.
//   - names: binary-safe lock names (spaces, unicode, braces, control bytes, invalid UTF-8,
//     1 KiB) through acquire, extend and release over core.Cluster.
//   - concurrency: 100 goroutines at once on one Node, each on its own lock (every reply
//     reaches its own caller) and all on one lock (exactly one wins).
//   - pubsub, for a Node that implements core.Subscriber: delivery of a notification
//     published right after Subscribe returned; unsubscribe stops delivery and is
//     idempotent; two subscriptions to one channel; one pub/sub connection for many
//     channels (redis-server); recovery after the server kills the pub/sub connection
//     (re-subscribe, one onMessage call, later messages delivered); Subscribe honours its
//     context against a server that never replies.
//   - cluster: a whole lock life over 3 nodes of the backend through core.Cluster, with
//     fencing tokens that increase from one holder to the next.
//
// A failure message names the part of the core.Node or core.Subscriber contract that was
// broken. The whole suite takes a few seconds per server.
package conformance
