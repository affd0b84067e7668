package conformance_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-redlock/redlock/conformance"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoodNode: the go-redis backend passes the whole suite, pub/sub included, on miniredis
// and on redis-server.
func TestGoodNode(t *testing.T) {
	conformance.Run(t, conformance.Harness{NewNode: goodNode, CloseClient: closeClients})
}

// faultEnv names the faulty node TestFaultyHelper runs the suite against.
const faultEnv = "REDLOCK_CONFORMANCE_FAULT"

// fault is a meta-test: a deliberately faulty node, and how the suite must report it.
type fault struct {
	name    string
	newNode func(t testing.TB, addr string) core.Node
	// newClusterNode makes the faulty node on conformance.RedisCluster (Harness.NewClusterNode);
	// nil for a fault that does not run there.
	newClusterNode func(t testing.TB, addrs []string) core.Node
	servers        []conformance.Server
	failing        []string // the leaf subtests under TestFaultyHelper that fail
	mayFail        []string // leaf subtests that may fail too, by a race the fault opens
	message        string   // a phrase of the failure message
	// racy: the fault is a data race, which the race detector reports in whatever check
	// runs at the time; under it, the checks in failing must fail, and others may.
	racy bool
}

// faults are the meta-tests: each deliberately faulty node, the servers it runs on, and
// exactly the checks that must fail for it (every other check of their groups must pass),
// with a phrase the failure message must contain.
var faults = []fault{
	{
		name: "ignores-ctx", newNode: newIgnoresCtx,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{
			"miniredis/context/deadline/open-connection",
			"miniredis/context/deadline/new-connection",
			"miniredis/context/call-deadline/open-connection",
			"miniredis/context/call-deadline/new-connection",
			"miniredis/context/cancel/open-connection",
			"miniredis/context/cancel/new-connection",
			"miniredis/context/cancelled-before",
			"miniredis/context/deadline/behind-others",
			"miniredis/context/late-reply",
			"miniredis/strings/context/deadline/open-connection",
			"miniredis/strings/context/deadline/new-connection",
			"miniredis/strings/context/call-deadline/open-connection",
			"miniredis/strings/context/call-deadline/new-connection",
			"miniredis/strings/context/cancel/open-connection",
			"miniredis/strings/context/cancel/new-connection",
			"miniredis/strings/context/cancelled-before",
		},
		message: "the Node must honour ctx",
	},
	{
		name: "no-eval-fallback", newNode: newPreloaded,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{
			"miniredis/noscript/acquire",
			"miniredis/noscript/extend",
			"miniredis/noscript/release",
			"miniredis/noscript/proclaim",
			"miniredis/noscript/leader",
			"miniredis/noscript/status",
			// Its scripts that are not core's were never loaded: NOSCRIPT hides the
			// script's own error message.
			"miniredis/errors/server-error/error-reply",
			"miniredis/arguments/empty",
			"miniredis/arguments/all-keys",
			"miniredis/evalsha/runs-once",
			"miniredis/evalsha/error-runs-once",
			"miniredis/evalsha/slow-reply-runs-once",
			"miniredis/replies/long",
			"miniredis/strings/bytes", "miniredis/strings/integers", "miniredis/strings/mixed", "miniredis/strings/empty",
			"miniredis/strings/long", "miniredis/strings/error-reply", "miniredis/strings/runs-once", "miniredis/strings/own-memory",
			"miniredis/strings/concurrency/overlapping", "miniredis/strings/concurrency/distinct", "miniredis/strings/error-runs-once",
			"miniredis/context/late-reply",
		},
		message: "the Node must fall back to EVAL",
	},
	{
		name: "error-as-reply", newNode: newErrorAsReply,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{
			"miniredis/errors/server-error/wrongtype",
			"miniredis/errors/server-error/error-reply",
			// The script's error after its write, and go-redis's redis.Nil, read as {0}.
			"miniredis/evalsha/error-runs-once",
			"miniredis/replies/nil",
			"miniredis/strings/error-reply", "miniredis/strings/not-an-array", "miniredis/strings/error-runs-once",
		},
		message: "never as a reply",
	},
	// One child per server, so that their 5 s waits for the missing call overlap.
	{
		name: "no-recovery-callback-miniredis", newNode: newForgetful,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/recovery", "miniredis/pubsub/recovery-every-channel", "miniredis/pubsub/recovery-after-resubscribe", // the connection cut by a proxy
			"miniredis/pubsub/recovery-after-outage"},
		message: "it must call onMessage once after recovery",
	},
	{
		name: "no-recovery-callback-redis-server", newNode: newForgetful,
		servers: []conformance.Server{conformance.RedisServer},
		failing: []string{"redis-server/pubsub/recovery", "redis-server/pubsub/recovery-every-channel", "redis-server/pubsub/recovery-after-resubscribe", // CLIENT KILL TYPE pubsub
			"redis-server/pubsub/recovery-after-outage"}, // a proxy
		message: "it must call onMessage once after recovery",
	},
	{
		name: "loses-sign", newNode: newLosesSign,
		servers: []conformance.Server{conformance.RedisServer},
		failing: []string{
			"redis-server/replies/negative/held-without-expiry", "redis-server/replies/negative/restart-guard",
			// A semaphore's acquire replies -1 for no permit, and -2 for a record of another number.
			"redis-server/scripts/acquire/semaphore-all-held", "redis-server/scripts/acquire/semaphore-count-mismatch",
		},
		message: "the Node must keep the sign of integer replies",
	},
	{
		name: "loses-sign-cluster", newClusterNode: newClusterLosesSign,
		servers: []conformance.Server{conformance.RedisCluster},
		failing: []string{
			"redis-cluster/replies/negative/held-without-expiry", "redis-cluster/replies/negative/restart-guard",
			"redis-cluster/scripts/acquire/semaphore-all-held", "redis-cluster/scripts/acquire/semaphore-count-mismatch",
		},
		message: "the Node must keep the sign of integer replies",
	},
	{
		name: "cross-slot-panics", newClusterNode: newCrossSlotPanics,
		servers: []conformance.Server{conformance.RedisCluster},
		failing: []string{"redis-cluster/errors/cross-slot", "redis-cluster/sets/cross-slot"},
		message: "it must return an error",
	},
	{
		name: "cross-slot-not-permanent", newClusterNode: newWrapsErrors,
		servers: []conformance.Server{conformance.RedisCluster},
		failing: []string{"redis-cluster/errors/cross-slot", "redis-cluster/errors/server-error/wrongtype", "redis-cluster/sets/cross-slot"},
		message: "which core.Permanent does not know",
	},
	{
		name: "eval-every-call", newNode: newEvalEveryCall,
		servers: []conformance.Server{conformance.RedisServer},
		failing: []string{"redis-server/evalsha/steady-state", "redis-server/strings/steady-state"},
		message: "the Node must send EVALSHA with Script.SHA1()",
	},
	{
		name: "runs-twice", newNode: newRunsTwice,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/evalsha/runs-once", "miniredis/evalsha/slow-reply-runs-once", "miniredis/scripts/acquire/fence-advances", "miniredis/strings/runs-once",
			"miniredis/scripts/acquire/semaphore-fence-advances"},
		// Its second call runs on after a cancellation of the first: whether the context
		// checks see that depends on the machine's timing (under load one of them passed).
		mayFail: []string{"miniredis/context/cancel/new-connection", "miniredis/context/cancel/open-connection",
			"miniredis/strings/context/cancel/new-connection", "miniredis/strings/context/cancel/open-connection"},
		message: "each Eval must run the script exactly once",
	},
	{
		name: "keeps-args", newNode: newKeepsArgs,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/arguments/kept-intact"},
		// core passes one args slice to the three nodes of a fan-out: a node's next call
		// overwrites it while another node's call of the previous fan-out may still read it,
		// which happens only when two fan-outs overlap (a detached release and the next
		// acquisition, say), as the machine's timing decides.
		mayFail: []string{"miniredis/independent-nodes/three-nodes"},
		racy:    true,
		message: "the Node must not keep or reuse the caller's slices after Eval returns",
	},
	{
		name: "unnamed", newNode: newUnnamed,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/string/non-empty", "miniredis/string/distinct"},
		message: "it must name the node",
	},
	{
		name: "same-name", newNode: newSameName,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/string/distinct"},
		message: "it must tell nodes apart in errors",
	},
	{
		name: "same-name-cluster", newClusterNode: newClusterSameName,
		servers: []conformance.Server{conformance.RedisCluster},
		failing: []string{"redis-cluster/string/distinct"},
		message: "the Nodes of two separate clusters",
	},
	{
		name: "drops-empty-args", newNode: newDropsEmptyArgs,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/arguments/empty"},
		// Core passes an empty waiter id: every check that takes a lock fails too.
		mayFail: []string{
			"miniredis/independent-nodes/three-nodes", "miniredis/scripts/release/ours", "miniredis/scripts/acquire/queue-order",
			"miniredis/scripts/acquire/held", "miniredis/concurrency/one-name", "miniredis/concurrency/distinct-names",
			"miniredis/names/spaces", "miniredis/names/nested-braces", "miniredis/names/1KiB", "miniredis/names/invalid-utf8",
			"miniredis/names/control-bytes", "miniredis/names/braces", "miniredis/names/unbalanced-braces", "miniredis/names/unicode",
			"miniredis/arguments/kept-intact", "miniredis/scripts/acquire/arguments-unchanged", "miniredis/replies/negative/held-without-expiry",
			"miniredis/scripts/acquire/identifies-the-server",
			"miniredis/scripts/acquire/reader-writer-holds", "miniredis/scripts/acquire/reader-writer-waiting", "miniredis/scripts/acquire/readers-hold",
			"miniredis/scripts/release/reader-last-wakes-writer", "miniredis/scripts/release/reader-not-last",
			"miniredis/scripts/release/wakes-readers",
			// A semaphore's calls pass empty arguments too.
			"miniredis/scripts/acquire/semaphore-free", "miniredis/scripts/acquire/semaphore-many-permits",
			"miniredis/scripts/acquire/semaphore-hint", "miniredis/scripts/acquire/semaphore-all-held",
			"miniredis/scripts/acquire/semaphore-count-mismatch", "miniredis/scripts/acquire/semaphore-own-permit-retry",
			"miniredis/scripts/acquire/semaphore-fence-advances", "miniredis/scripts/acquire/semaphore-identifies-the-server",
			"miniredis/scripts/release/semaphore-wakes", "miniredis/scripts/release/semaphore-any-permit",
			"miniredis/scripts/release/semaphore-not-ours", "miniredis/scripts/release/semaphore-missing",
			// And a set's, a reader set's too.
			"miniredis/sets/release/ours", "miniredis/sets/release/wakes",
			"miniredis/sets/acquire/reader-writer-holds", "miniredis/sets/release/reader-ours", "miniredis/sets/release/reader-not-last",
			"miniredis/sets/release/wakes-reader-set", "miniredis/sets/release/readers-behind-reader-set", "miniredis/sets/release/readers-wait",
			// Without the empty waiter id, acquire's ARGV shift by one and its mode falls on the
			// hinted permit ("-1"): every acquire runs as a semaphore's.
			"miniredis/noscript/acquire", "miniredis/errors/server-error/wrongtype", "miniredis/replies/own-memory",
			"miniredis/scripts/acquire/free", "miniredis/scripts/acquire/fence-advances", "miniredis/scripts/acquire/own-token-retry",
			"miniredis/scripts/acquire/reader-free", "miniredis/scripts/acquire/reader-shared",
			"miniredis/scripts/extend/reader-ours", "miniredis/scripts/extend/reader-gone",
			"miniredis/sets/acquire/free", "miniredis/sets/acquire/reader-free", "miniredis/sets/acquire/reader-overlapping",
			"miniredis/sets/extend/reader-ours",
		},
		message: "the Node must pass every argument, empty ones included",
	},
	{
		name: "five-keys", newNode: newFiveKeys,
		servers: []conformance.Server{conformance.Miniredis},
		// Every check that runs a script needing the sixth key (the readers key) fails too:
		// the readers' scripts, and a release that hands the lock to readers.
		failing: []string{
			"miniredis/arguments/all-keys",
			"miniredis/scripts/acquire/reader-free", "miniredis/scripts/acquire/reader-shared", "miniredis/scripts/acquire/reader-writer-waiting",
			"miniredis/scripts/acquire/readers-hold", "miniredis/scripts/extend/reader-ours", "miniredis/scripts/extend/reader-gone",
			"miniredis/scripts/release/reader-last-wakes-writer", "miniredis/scripts/release/reader-not-last",
			"miniredis/scripts/release/reader-writer-holds", "miniredis/scripts/release/wakes-readers",
			// And the checks of a semaphore, whose scripts take six keys and then its permits,
			// but for a release that finds nothing of ours (with no permit, it finds none).
			"miniredis/scripts/acquire/semaphore-free", "miniredis/scripts/acquire/semaphore-many-permits",
			"miniredis/scripts/acquire/semaphore-hint", "miniredis/scripts/acquire/semaphore-all-held",
			"miniredis/scripts/acquire/semaphore-count-mismatch", "miniredis/scripts/acquire/semaphore-own-permit-retry",
			"miniredis/scripts/acquire/semaphore-fence-advances", "miniredis/scripts/acquire/semaphore-identifies-the-server",
			"miniredis/scripts/release/semaphore-wakes", "miniredis/scripts/release/semaphore-any-permit",
			// And every check of a set, whose scripts take each name's six keys, a reader
			// set's too.
			"miniredis/sets/acquire/free", "miniredis/sets/acquire/held", "miniredis/sets/acquire/held-retried",
			"miniredis/sets/release/ours", "miniredis/sets/release/wakes",
			"miniredis/sets/acquire/reader-free", "miniredis/sets/acquire/reader-overlapping", "miniredis/sets/acquire/reader-writer-holds", "miniredis/sets/acquire/reader-waiter-ahead",
			"miniredis/sets/extend/reader-ours", "miniredis/sets/release/reader-ours", "miniredis/sets/release/reader-not-last",
			"miniredis/sets/release/wakes-reader-set", "miniredis/sets/release/readers-behind-reader-set", "miniredis/sets/release/readers-wait",
		},
		message: "the Node must pass every key, in order, unchanged",
	},
	{
		name: "sixteen-keys", newNode: newSixteenKeys,
		servers: []conformance.Server{conformance.Miniredis},
		// Enough for a lock's calls and a small semaphore's: the checks of a semaphore of a
		// few dozen permits fail, and those of a set of three names (18 KEYS) that take,
		// queue or hand over on its third name, whose waiters key never arrives (acquire
		// asks whether its queue keys exist), and every check of a reader set, whose rlock
		// needs its third name's readers key.
		failing: []string{
			"miniredis/arguments/all-keys", "miniredis/scripts/acquire/semaphore-many-permits", "miniredis/scripts/acquire/semaphore-hint",
			"miniredis/scripts/release/semaphore-any-permit",
			"miniredis/sets/acquire/free", "miniredis/sets/acquire/held", "miniredis/sets/acquire/held-retried", "miniredis/sets/release/wakes",
			"miniredis/sets/acquire/reader-free", "miniredis/sets/acquire/reader-overlapping", "miniredis/sets/acquire/reader-writer-holds", "miniredis/sets/acquire/reader-waiter-ahead",
			"miniredis/sets/extend/reader-ours", "miniredis/sets/release/reader-ours", "miniredis/sets/release/reader-not-last",
			"miniredis/sets/release/wakes-reader-set", "miniredis/sets/release/readers-behind-reader-set", "miniredis/sets/release/readers-wait",
		},
		message: "the Node must pass every one of the 46 KEYS",
	},
	{
		name: "shared-reply", newNode: newSharedReply,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{
			"miniredis/replies/own-memory", "miniredis/scripts/acquire/own-token-retry", "miniredis/strings/own-memory",
			"miniredis/scripts/acquire/semaphore-own-permit-retry",
		},
		racy: true,
		// Concurrent callers read each other's replies, when they overlap.
		mayFail: []string{
			"miniredis/concurrency/one-name", "miniredis/concurrency/distinct-names", "miniredis/strings/concurrency/distinct",
			"miniredis/strings/concurrency/overlapping", "miniredis/independent-nodes/three-nodes",
			"miniredis/names/spaces", "miniredis/names/nested-braces", "miniredis/names/1KiB", "miniredis/names/invalid-utf8",
			"miniredis/names/control-bytes", "miniredis/names/braces", "miniredis/names/unbalanced-braces", "miniredis/names/unicode",
		},
		message: "never a buffer the Node reuses",
	},
	{
		name: "broadcast", newNode: newBroadcast,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/isolation", "miniredis/pubsub/isolation-same-lock"},
		message: "a Subscriber must deliver each message only to the handlers of its own channel",
	},
	{
		name: "never-unsubscribes", newNode: newNeverUnsubscribes,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/unsubscribe-on-server"},
		message: "the backend must unsubscribe on the server",
	},
	{
		name: "early-ready", newNode: newEarlyReady,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{
			"miniredis/pubsub/ready-means-confirmed/new-connection", "miniredis/pubsub/ready-means-confirmed/open-connection",
			"miniredis/pubsub/subscribe-deadline/open-connection", "miniredis/pubsub/subscribe-deadline/new-connection",
			"miniredis/pubsub/subscribe-cancel/open-connection", "miniredis/pubsub/subscribe-cancel/new-connection",
			"miniredis/pubsub/subscribe-deadline/leaves-nothing", "miniredis/pubsub/subscribe-while-subscribing",
		},
		// A PUBLISH right after Subscribe returned usually finds no subscriber yet.
		mayFail: []string{
			"miniredis/pubsub/delivery", "miniredis/pubsub/recovery", "miniredis/pubsub/two-subscribers", "miniredis/pubsub/shared-connection",
			"miniredis/pubsub/unsubscribe", "miniredis/pubsub/unsubscribe-on-server", "miniredis/pubsub/isolation",
			"miniredis/pubsub/recovery-every-channel", "miniredis/pubsub/recovery-after-resubscribe", "miniredis/pubsub/isolation-same-lock",
			"miniredis/pubsub/semaphore-wake",
			"miniredis/pubsub/unsubscribe-twice", "miniredis/pubsub/recovery-after-outage", "miniredis/pubsub/no-call-after-unsubscribe",
		},
		message: "it must return only once the server confirmed the subscription",
	},
	{
		name: "first-unconfirmed", newNode: newFirstUnconfirmed,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/ready-means-confirmed/new-connection"},
		// A PUBLISH right after the first Subscribe returned may come before the server
		// handled the SUBSCRIBE written just before.
		mayFail: []string{
			"miniredis/pubsub/delivery", "miniredis/pubsub/recovery", "miniredis/pubsub/two-subscribers", "miniredis/pubsub/shared-connection",
			"miniredis/pubsub/unsubscribe", "miniredis/pubsub/unsubscribe-on-server", "miniredis/pubsub/isolation",
			"miniredis/pubsub/ready-means-confirmed/open-connection",
			"miniredis/pubsub/recovery-every-channel", "miniredis/pubsub/recovery-after-resubscribe", "miniredis/pubsub/isolation-same-lock",
			"miniredis/pubsub/semaphore-wake",
			// Its first subscription's confirmation may still be on its way when the proxy
			// starts to hold the server's replies.
			"miniredis/pubsub/subscribe-deadline/leaves-nothing",
			"miniredis/pubsub/unsubscribe-twice", "miniredis/pubsub/recovery-after-outage", "miniredis/pubsub/no-call-after-unsubscribe",
			"miniredis/pubsub/subscribe-while-subscribing",
		},
		message: "the first subscription of a Node (on a new pub/sub connection), returned (error <nil>) while the server's confirmation was held back",
	},
	{
		name: "conn-per-channel", newNode: newConnPerChannel,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/shared-connection"},
		message: "a backend shares one pub/sub connection per node",
	},
	{
		name: "hides-sharded", newClusterNode: newHidesSharded,
		servers: []conformance.Server{conformance.RedisCluster},
		failing: []string{
			"redis-cluster/pubsub/delivery", "redis-cluster/pubsub/isolation", "redis-cluster/pubsub/unsubscribe",
			"redis-cluster/pubsub/unsubscribe-on-server", "redis-cluster/pubsub/two-subscribers",
			"redis-cluster/pubsub/shared-connection", "redis-cluster/pubsub/recovery",
			"redis-cluster/pubsub/recovery-every-channel", "redis-cluster/pubsub/recovery-after-resubscribe", "redis-cluster/pubsub/isolation-same-lock",
			"redis-cluster/pubsub/semaphore-wake", "redis-cluster/pubsub/unsubscribe-twice", "redis-cluster/pubsub/no-call-after-unsubscribe",
		},
		message: "so it must implement core.ShardedPubSub (reporting true) on the outer Node",
	},
	{
		name: "claims-sharded", newNode: newClaimsSharded,
		servers: []conformance.Server{conformance.RedisServer},
		failing: []string{
			"redis-server/pubsub/delivery", "redis-server/pubsub/isolation", "redis-server/pubsub/unsubscribe",
			"redis-server/pubsub/unsubscribe-on-server", "redis-server/pubsub/two-subscribers",
			"redis-server/pubsub/shared-connection", "redis-server/pubsub/recovery",
			"redis-server/pubsub/ready-means-confirmed/new-connection", "redis-server/pubsub/ready-means-confirmed/open-connection",
			"redis-server/pubsub/recovery-every-channel", "redis-server/pubsub/recovery-after-resubscribe", "redis-server/pubsub/isolation-same-lock",
			"redis-server/pubsub/semaphore-wake", "redis-server/pubsub/unsubscribe-twice", "redis-server/pubsub/no-call-after-unsubscribe",
			"redis-server/pubsub/subscribe-while-subscribing", "redis-server/pubsub/recovery-after-outage",
		},
		message: "though its core.ShardedPubSub reports true",
	},
	{
		name: "conn-per-channel-cluster", newClusterNode: newClusterConnPerChannel,
		servers: []conformance.Server{conformance.RedisCluster},
		// CLIENT LIST on the master of the channel subscribed twice counts two connections.
		failing: []string{"redis-cluster/pubsub/shared-connection"},
		message: "a backend shares one pub/sub connection per node (per master of a cluster)",
	},
	// The faults that show only after a timeout, a reconnect, an error or an unusual reply.
	{
		name: "retries-errors", newNode: newRetriesErrors,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/evalsha/error-runs-once"},
		message: "a backend that retries on any error runs a script that wrote and then failed twice",
	},
	{
		name: "resends-eval-after-timeout", newNode: newResendsEval,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/evalsha/slow-reply-runs-once"},
		// A call that a loaded machine delays past the fault's own 500 ms timeout (one of the
		// 100 at once, say) is sent again, and its lock's fence advances twice.
		mayFail: []string{"miniredis/concurrency/distinct-names"},
		message: "the Node sent it again while the first request was still waiting for its reply",
	},

	{
		name: "strings-eval-every-call", newNode: newStringsEvalEveryCall,
		servers: []conformance.Server{conformance.RedisServer},
		failing: []string{"redis-server/strings/steady-state"},
		message: "EvalStrings must send EVALSHA with Script.SHA1(), as Eval does",
	},
	{
		name: "strings-retries-errors", newNode: newStringsRetriesErrors,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/strings/error-runs-once"},
		message: "must not send a script that failed again",
	},
	{
		name: "strings-pool-of-one", newNode: newStringsPoolOfOne,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/strings/concurrency/overlapping"},
		// 100 calls at once overlap, as the machine's timing decides.
		mayFail: []string{"miniredis/strings/concurrency/distinct"},
		message: "a Node must be safe for concurrent use",
	},
	{
		name: "serialises-calls", newNode: newSerialisesCalls,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/context/deadline/behind-others"},
		message: "a call waiting behind others in the Node",
	},
	{
		name: "drops-waiter", newNode: newDropsWaiter,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/context/late-reply"},
		message: "the late reply of that earlier call",
	},
	{
		name: "integer-as-array", newNode: newIntegerAsArray,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/errors/bad-reply/integer", "miniredis/errors/bad-reply/zero"},
		message: "the server had replied, so the error must say what it replied, at once",
	},
	{
		name: "strings-as-array", newNode: newStringsAsArray,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/strings/not-an-array"},
		message: "the server had replied, so the error must say what it replied, at once",
	},
	{
		name: "nil-as-empty", newNode: newNilAsEmpty,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/replies/nil"},
		message: "a nil reply is an error, not an empty array",
	},
	{
		name: "nil-waits", newNode: newNilWaits,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/replies/nil"},
		message: "a context's error means the Node waited for more",
	},
	{
		name: "short-reply-buffer", newNode: newShortBuffer,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/replies/long"},
		message: "a long reply must come back whole and exact",
	},
	{
		name: "own-closed-error", newNode: newOwnClosedError,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/errors/closed-client"},
		message: "which does not match core.ErrClosed under errors.Is",
	},
	{
		name: "wraps-errors", newNode: newWrapsErrorsSingle,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/errors/server-error/wrongtype"},
		message: "which core.Permanent does not know",
	},
	{
		name: "ignores-ctx-cluster", newClusterNode: newClusterIgnoresCtx,
		servers: []conformance.Server{conformance.RedisCluster},
		failing: []string{
			"redis-cluster/context/deadline/open-connection",
			"redis-cluster/context/deadline/new-connection",
			"redis-cluster/context/call-deadline/open-connection",
			"redis-cluster/context/call-deadline/new-connection",
			"redis-cluster/context/cancel/open-connection",
			"redis-cluster/context/cancel/new-connection",
			"redis-cluster/context/cancelled-before",
			"redis-cluster/strings/context/deadline/open-connection",
			"redis-cluster/strings/context/deadline/new-connection",
			"redis-cluster/strings/context/call-deadline/open-connection",
			"redis-cluster/strings/context/call-deadline/new-connection",
			"redis-cluster/strings/context/cancel/open-connection",
			"redis-cluster/strings/context/cancel/new-connection",
			"redis-cluster/strings/context/cancelled-before",
		},
		message: "the Node must honour ctx",
	},
	{
		name: "wakes-first-channel-only", newNode: newWakesFirstOnly,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/recovery-every-channel"},
		message: "the backend must call onMessage of every subscribed channel once",
	},
	{
		name: "wakes-before-resubscribing", newNode: newWakesOnError,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/recovery-after-resubscribe"},
		// A check that publishes once woken finds no subscriber where the wake came first
		// and the new SUBSCRIBE had not landed yet (seen beside a CPU loop). After an outage
		// it wakes at the failed attempts only: whether one comes after the outage check
		// starts counting depends on the timing.
		mayFail: []string{"miniredis/pubsub/recovery-every-channel", "miniredis/pubsub/recovery-after-outage"},
		message: "the backend must call it only once it has subscribed again",
	},
	{
		name: "counts-unsubscribes", newNode: newCountsUnsubscribes,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/unsubscribe-twice"},
		message: "the second must stay active (unsubscribe is idempotent)",
	},
	{
		name: "joins-pending", newNode: newJoinsPending,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/subscribe-while-subscribing"},
		message: "a Subscribe to a channel the connection already listens on must return only once the subscription is active",
	},
	{
		name: "gives-up-reconnecting", newNode: newGivesUp,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/recovery-after-outage"},
		message: "however long the outage",
	},
	{
		name: "unsubscribes-at-confirmation", newNode: newUnsubscribesAtConfirm,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/no-call-after-unsubscribe"},
		// A PUBLISH right after unsubscribe returned still reaches the callback when the
		// server handles it before the UNSUBSCRIBE, sent on a goroutine of the fault's.
		mayFail: []string{"miniredis/pubsub/unsubscribe"},
		message: "once unsubscribe returns, no new call may start",
	},
	{
		name: "subscribe-ignores-cancel", newNode: newIgnoresCancel,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/subscribe-cancel/new-connection", "miniredis/pubsub/subscribe-cancel/open-connection"},
		message: "Subscribe must honour ctx's cancellation, not only its deadline",
	},
	{
		name: "keeps-timed-out-subscription", newNode: newKeepsTimedOut,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/subscribe-deadline/leaves-nothing"},
		message: "a Subscribe that timed out must leave nothing subscribed on the server",
	},
	{
		name: "delivers-by-hash-tag", newNode: newByHashTag,
		servers: []conformance.Server{conformance.Miniredis},
		failing: []string{"miniredis/pubsub/isolation-same-lock"},
		message: "not of its slot or hash tag",
	},
}

// TestFaultyHelper runs the suite against the faulty node named by $REDLOCK_CONFORMANCE_FAULT.
// It is meant to fail: TestFaultyNodesAreCaught runs it in a child process and reads the
// report. Without the variable it skips.
func TestFaultyHelper(t *testing.T) {
	name := os.Getenv(faultEnv)
	if name == "" {
		t.Skip("run by TestFaultyNodesAreCaught in a child process")
	}
	i := slices.IndexFunc(faults, func(f fault) bool { return f.name == name })
	require.GreaterOrEqual(t, i, 0, "unknown fault %q", name)
	f := faults[i]
	h := conformance.Harness{NewNode: f.newNode, NewClusterNode: f.newClusterNode, Servers: f.servers, CloseClient: closeClients}
	if h.NewNode == nil { // a fault of the cluster only: Run requires a NewNode, and never calls it
		h.NewNode = func(t testing.TB, _ string) core.Node {
			t.Fatalf("the fault %s has no single-server node: its servers must be %v only", f.name, conformance.RedisCluster)
			return nil
		}
	}
	conformance.Run(t, h)
}

var failLine = regexp.MustCompile(`--- FAIL: TestFaultyHelper/(\S+)`)

// childrenAtOnce is how many child processes TestFaultyNodesAreCaught runs at a time: they
// mostly wait for timeouts, but each runs the suite's concurrency checks (100 goroutines on
// one node, under the race detector), and all of them at once on a 2-core machine made
// those checks time out in every child.
const childrenAtOnce = 4

// TestFaultyNodesAreCaught is the suite's own test: for each faulty node it runs, in a
// child process (childrenAtOnce at a time), the groups of the checks that must fail for it,
// and checks that the run failed by exactly those checks (every other check of their groups
// passed), with the expected message. That a correct node passes every check, TestGoodNode
// shows.
func TestFaultyNodesAreCaught(t *testing.T) {
	if os.Getenv(faultEnv) != "" {
		t.Skip("already in a child process")
	}
	type child struct {
		cmd  *exec.Cmd
		out  bytes.Buffer
		err  error
		done chan struct{} // closed once the child has ended (or failed to start)
	}
	children := make([]*child, len(faults))
	slots := make(chan struct{}, childrenAtOnce)
	for i, f := range faults {
		if (slices.Contains(f.servers, conformance.RedisServer) || slices.Contains(f.servers, conformance.RedisCluster)) && !redisServerAvailable() {
			continue // its subtest skips
		}
		c := &child{cmd: exec.Command(os.Args[0], "-test.run="+runPattern(f.failing), "-test.v", "-test.count=1"), done: make(chan struct{})}
		c.cmd.Env = append(os.Environ(), faultEnv+"="+f.name)
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
		children[i] = c
		go func() {
			defer close(c.done)
			slots <- struct{}{}
			defer func() { <-slots }()
			c.err = c.cmd.Run()
		}()
	}
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			c := children[i]
			if c == nil {
				t.Skip("redis-server not on PATH")
			}
			<-c.done
			err := c.err
			out := c.out.String()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the suite passed (or did not run) for the faulty node %s: %v\n%s", f.name, err, out)

			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(out, -1) {
				failed = append(failed, m[1])
			}
			got := slices.DeleteFunc(leaves(failed), func(name string) bool {
				return slices.Contains(f.mayFail, name) && !slices.Contains(f.failing, name)
			})
			if f.racy && raceEnabled {
				got = slices.DeleteFunc(got, func(name string) bool { return !slices.Contains(f.failing, name) })
			}
			assert.ElementsMatch(t, f.failing, got, "the checks that failed for the faulty node %s (besides those that may: %v)\n%s", f.name, f.mayFail, out)
			assert.Contains(t, out, f.message, "the failure message for %s", f.name)
			if !t.Failed() {
				t.Logf("caught by %s", strings.Join(f.failing, ", "))
			}
		})
	}
}

// runPattern returns the -test.run pattern of the child that runs TestFaultyHelper for a
// fault whose failing checks are failing: the groups those checks are in, on the servers
// they are on. The whole suite in every child took most of the package's time.
func runPattern(failing []string) string {
	var servers, groups []string
	for _, name := range failing {
		parts := strings.SplitN(name, "/", 3)
		if !slices.Contains(servers, parts[0]) {
			servers = append(servers, parts[0])
		}
		if len(parts) > 1 && !slices.Contains(groups, parts[1]) {
			groups = append(groups, parts[1])
		}
	}
	return "^TestFaultyHelper$/^(" + strings.Join(servers, "|") + ")$/^(" + strings.Join(groups, "|") + ")$"
}

// leaves returns the failed subtests that have no failed subtest of their own.
func leaves(failed []string) []string {
	var out []string
	for _, name := range failed {
		if !slices.ContainsFunc(failed, func(other string) bool { return strings.HasPrefix(other, name+"/") }) {
			out = append(out, name)
		}
	}
	return out
}

func redisServerAvailable() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}
