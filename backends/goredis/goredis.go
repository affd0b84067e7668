// Package goredis is the redlock backend for go-redis v9: a core.Node over a
// redis.UniversalClient (*redis.Client, *redis.ClusterClient, or a failover client).
//
// go-redis logs every failed connection attempt to standard error, through one logger for
// the whole process ("redis: connection pool: failed to dial after 5 attempts: ..."), many
// times a second while a server is down. A call of the Node reports that failure itself
// (see New), so a program may silence go-redis: once, before its clients are used, give
// redis.SetLogger a logger whose Printf drops the message:
//
//	type quiet struct{}
//
//	func (quiet) Printf(context.Context, string, ...any) {}
//
//	redis.SetLogger(quiet{})
//
// That silences every go-redis client of the process, not only redlock's.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/backends/internal/argv"
	"github.com/go-redlock/redlock/backends/internal/ctxcall"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// Node is one Redis master (or one Redis Cluster) reached through a go-redis client. It is
// safe for concurrent use. A Node made by New does not own the client and never closes it;
// one made by Dial owns the client it made, and its Close closes it.
type Node struct {
	client   redis.UniversalClient
	refused  error // why every call fails: the client cannot be a Node (see New)
	name     string
	deadline bool          // the client applies a context's deadline to all its I/O
	readTO   time.Duration // the client's ReadTimeout, if positive (see bound)
	dials    *dialRecord   // the client's last failed dial, if none succeeded since
	ps       *pubsub       // Subscribe's state; see subscribe.go
	shas     sync.Map      // *core.Script → its SHA1 as an any, boxed once (see command)
	warming  atomic.Bool   // a connection is being made in the background (see warm)
	owned    bool          // the client is the Node's (see Dial): Close closes it
	shut     sync.Once     // closes an owned client once

	warmMu     sync.Mutex      // orders warm's start of a connection before Close's wait
	warmStop   context.Context // ended by Close: no connection is made in the background after
	warmCancel context.CancelFunc
	warmGroup  sync.WaitGroup
}

var (
	_ core.Node = (*Node)(nil)
)

// New returns the Node for c: a *redis.Client, a *redis.ClusterClient, or a failover client
// (redis.NewFailoverClient). New of a nil client returns nil, which redlock.New rejects.
//
// A *redis.Ring is refused: every call of its Node fails with an error that matches
// core.ErrInvalid and says why. A Ring spreads keys over its shards by hash and, when a
// shard is down, moves that shard's keys to the others, so a lock held on the shard that
// went down could be granted again on another: one vote that can change its mind. Give
// each master a Node of its own instead, each over its own *redis.Client.
//
// New adds a hook to c (redis.Hook, for dials only) that records the client's failed
// connection attempts: a call that fails while the server cannot be reached reports why
// (a refused connection, say), where go-redis itself, which dials again until the context
// ends, would report only the context's deadline.
//
// Each node's client should be its own: Redlock needs N independent masters, so do not
// point two Nodes at one server. The client's own timeouts still apply; redlock bounds each
// call with a shorter per-node timeout through the context.
func New(c redis.UniversalClient) *Node {
	if c == nil || reflect.ValueOf(c).IsNil() {
		return nil
	}
	n := &Node{client: c, name: name(c), deadline: honoursDeadline(c), readTO: readTimeout(c), dials: new(dialRecord), ps: newPubSub(c)}
	c.AddHook(n.dials)
	n.warmStop, n.warmCancel = context.WithCancel(context.Background())
	if _, ok := c.(*redis.Ring); ok {
		n.refused = fmt.Errorf("%w: a *redis.Ring cannot be a node: it moves a shard's keys to the others when the shard is down, so one lock could be granted twice; give each master a Node of its own, over a *redis.Client", core.ErrInvalid)
	}
	return n
}

// honoursDeadline reports whether c was built with ContextTimeoutEnabled and sets deadlines
// on its connections, so that a context's deadline bounds its reads, writes and connection
// handshakes. A ReadTimeout or WriteTimeout of -2 (negative once go-redis has read the
// options) disables go-redis's SetReadDeadline or SetWriteDeadline calls, the context's
// deadline with them.
func honoursDeadline(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	}
	return false
}

// readTimeout returns c's ReadTimeout (go-redis's default is 3 s), or 0 if it has none.
func readTimeout(c redis.UniversalClient) time.Duration {
	var d time.Duration
	switch c := c.(type) {
	case *redis.Client:
		d = c.Options().ReadTimeout
	case *redis.ClusterClient:
		d = c.Options().ReadTimeout
	}
	return max(d, 0)
}

// bound returns ctx with a deadline no later than the client's ReadTimeout from now (and
// its cancel func), or ctx itself (and a no-op) if its deadline is that soon already or the
// client has no ReadTimeout. go-redis sends a command again when its read times out while
// the command's context is still live: a script queued behind a slow one would then run
// twice, and a SET NX would find its own key and report false. Under the bound the context
// ends with the read, so go-redis gives up instead.
func (n *Node) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if n.readTO <= 0 {
		return ctx, func() {}
	}
	limit := time.Now().Add(n.readTO)
	if d, ok := ctx.Deadline(); ok && !d.After(limit) {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, limit)
}

func name(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		if addr := c.Options().Addr; addr != failoverAddr {
			return addr
		}
	case *redis.ClusterClient:
		if addrs := c.Options().Addrs; len(addrs) > 0 {
			return "cluster(" + strings.Join(addrs, ",") + ")"
		}
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer {
		return fmt.Sprintf("%T@%#x", c, v.Pointer())
	}
	return fmt.Sprintf("%T", c)
}

// failoverAddr is the Options.Addr of every *redis.Client that redis.NewFailoverClient makes.
const failoverAddr = "FailoverClient"

// String returns the server's address, or "cluster(addr,...)" for a cluster client; for a
// client that names no server (a failover client, whose Options.Addr is "FailoverClient",
// or a cluster client without Addrs, such as redis.NewFailoverClusterClient's) and for
// another kind of client, its type and (a pointer's) address, as in
// "*redis.Client@0xc000123450".
func (n *Node) String() string { return n.name }

// Eval runs s with EVALSHA, and with EVAL when the server does not have the script yet.
//
// It returns when ctx ends even if the server has not answered. With
// Options.ContextTimeoutEnabled (recommended), go-redis bounds the call's reads, writes and
// connection handshake by ctx's deadline (unless ReadTimeout or WriteTimeout is -2, which
// disables its deadlines), so Eval calls it directly when ctx has one (core's contexts
// always do); a cancellation before that deadline is then noticed at the deadline.
// go-redis closes the connection of a call that its deadline ended, and a new one costs
// several round trips before the command's (the connection, HELLO, CLIENT SETINFO): so
// after such a call, a *redis.Client's Node makes a connection in the background (one at a
// time, none while the pool has an idle one, within five times the call's time and the
// client's DialTimeout), for the next call to find ready. Without it a
// server a quarter of the node timeout away could not be reached again once a call to it
// had timed out. Otherwise the call runs in a goroutine of its own, Eval returns at ctx's
// end, and the call goes on in the background until the client's own timeouts (seconds)
// end it.
//
// A call gets at most the client's ReadTimeout (Options.ReadTimeout, 3 s by default) for
// its reply, whatever ctx allows: go-redis sends a command again after a read timeout
// while its context is live, and the script would run twice (see bound). Such a call fails
// with context.DeadlineExceeded; a call whose connection broke under it is sent again by
// go-redis (MaxRetries), which is the only resend.
//
// The reply of one of core's scripts (core.Scripts), an array of integers by construction,
// is decoded straight into the []int64. Any other script's reply is decoded element by
// element, and an element that is not an integer (a nil, text even if it spells a number,
// an array) is an error: go-redis's own decoding of an integer array would read a nil
// element as 0 and the text "7" as 7.
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if coreScripts[s] {
		return run(ctx, n, s, keys, args, redis.NewIntSliceCmd)
	}
	// redis.Cmd reads whatever the server replies (go-redis's SliceCmd would take an integer
	// reply for an array's length and wait for that many elements).
	v, err := run(ctx, n, s, keys, args, redis.NewCmd)
	if err != nil {
		return nil, err
	}
	return core.Ints(s, v)
}

// coreScripts are core's scripts, whose replies Eval decodes straight into a []int64.
var coreScripts = func() map[*core.Script]bool {
	m := make(map[*core.Script]bool)
	for _, s := range core.Scripts() {
		m[s] = true
	}
	return m
}()

// EvalStrings runs s as Eval does, through the same calls, bounds and fallbacks, and
// returns its reply's elements as strings (see core.Node): a nil element is "".
func (n *Node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	return run(ctx, n, s, keys, args, redis.NewStringSliceCmd)
}

// replyCmd is a go-redis command whose reply decodes to a T: *redis.IntSliceCmd or
// *redis.Cmd for Eval, *redis.StringSliceCmd for EvalStrings.
type replyCmd[T any] interface {
	redis.Cmder
	Result() (T, error)
}

// run is Eval and EvalStrings (see Eval), with newCmd making the command that decodes the
// reply.
func run[T any, C replyCmd[T]](ctx context.Context, n *Node, s *core.Script, keys, args []string, newCmd func(context.Context, ...any) C) (T, error) {
	var zero T
	if n.refused != nil {
		return zero, n.refused
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if n.direct(ctx) {
		ctx, cancel := n.bound(ctx)
		defer cancel()
		start := time.Now()
		v, err := eval(ctx, n, s, n.command(s, keys, args, true), newCmd)
		if err != nil && ctx.Err() != nil {
			n.warm(ctx, start)
		}
		return v, n.cause(err)
	}
	cmd := n.command(s, keys, args, false) // the call may outlive Eval: no pointers into keys or args
	v, err := ctxcall.Go(ctx, func() (T, error) {
		ctx, cancel := n.bound(ctx)
		defer cancel()
		return eval(ctx, n, s, cmd, newCmd)
	})
	return v, n.cause(err)
}

// warm makes a connection to the server in the background after a call, started at start
// under ctx, that ctx's deadline ended: go-redis closes the connection of a call that timed
// out, and a new one costs several round trips (the connection, HELLO, CLIENT SETINFO)
// before the command's, so a server whose round trip is a fraction of the node timeout
// could never be reached again on a fresh connection made within it. The connection is made
// within five times the time that call had (a handshake of up to four round trips, and a
// Ping), and within the client's DialTimeout, and goes back to the pool for the next call.
// At most one at a time per Node, and none while the pool has an idle connection: a Ping on
// that one would hold it for a round trip, and a call made meanwhile would start a
// connection of its own that its deadline ends in turn (with calls back to back, for ever).
// A *redis.Client only (a cluster client connects per shard). Close cancels it and waits
// for it, for at most that bound: go-redis notices a cancellation only at the deadline.
func (n *Node) warm(ctx context.Context, start time.Time) {
	c, ok := n.client.(*redis.Client)
	if !ok || c.PoolStats().IdleConns > 0 || !n.warming.CompareAndSwap(false, true) {
		return
	}
	deadline, _ := ctx.Deadline()
	budget := deadline.Sub(start)
	n.warmMu.Lock()
	defer n.warmMu.Unlock()
	if n.warmStop.Err() != nil { // closed
		n.warming.Store(false)
		return
	}
	n.warmGroup.Go(func() {
		defer n.warming.Store(false)
		ctx, cancel := context.WithTimeout(n.warmStop, min(5*budget, c.Options().DialTimeout))
		defer cancel()
		_ = c.Ping(ctx).Err()
	})
}

// dialRecord is a redis.Hook that records the client's last failed dial, until a dial
// succeeds. It is safe for concurrent use.
type dialRecord struct{ failed atomic.Pointer[error] }

// DialHook records the outcome of each dial of the client.
func (d *dialRecord) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			d.failed.Store(&err)
		} else if d.failed.Load() != nil {
			d.failed.Store(nil)
		}
		return conn, err
	}
}

// ProcessHook leaves commands as they are.
func (*dialRecord) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines as they are.
func (*dialRecord) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// cause returns err with the client's last failed dial as its cause, if err says only that
// a context ended while no dial has succeeded since that one: go-redis dials again until the
// context ends, and then returns the context's error alone. A deadline's error becomes the
// dial's ("redlock: 10.0.0.1:6379: no reply, and the last connection attempt failed: dial
// tcp ...: connection refused"), so that core's "node timed out" gives the cause; a
// cancellation stays context.Canceled, with the dial's error added.
func (n *Node) cause(err error) error {
	if err == nil {
		return nil
	}
	failed := n.dials.failed.Load()
	if failed == nil {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("redlock: %s: no reply, and the last connection attempt failed: %w", n.name, *failed)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%w (redlock: %s: the last connection attempt failed: %w)", err, n.name, *failed)
	}
	return err
}

// closed returns err, made to match core.ErrClosed too if it says the client is closed.
func closed(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %w", core.ErrClosed, err)
	}
	return err
}

// direct reports whether go-redis itself ends a call at ctx's deadline: ctx has one, and
// the client honours it (a cancellation before the deadline is then noticed at the deadline).
func (n *Node) direct(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok && n.deadline
}

// command returns EVALSHA's arguments for s, keys and args. With borrow, each key and
// argument is passed as a pointer into keys and args, which go-redis writes (and routes
// by) as the string it points to: a string boxed in an interface is an allocation, a
// pointer is not. Only a call that ends before Eval returns may borrow them.
func (n *Node) command(s *core.Script, keys, args []string, borrow bool) []any {
	sha, ok := n.shas.Load(s)
	if !ok {
		sha, _ = n.shas.LoadOrStore(s, s.SHA1())
	}
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", sha, len(keys))
	if !borrow {
		for _, k := range keys {
			cmd = append(cmd, k)
		}
		return argv.Append(cmd, args...)
	}
	for i := range keys {
		cmd = append(cmd, &keys[i])
	}
	for i := range args {
		cmd = append(cmd, &args[i])
	}
	return cmd
}

// eval sends cmd (see command), and EVAL with s's source instead if the server does not
// have the script yet.
func eval[T any, C replyCmd[T]](ctx context.Context, n *Node, s *core.Script, cmd []any, newCmd func(context.Context, ...any) C) (T, error) {
	v, err := process(ctx, n, cmd, newCmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd[0], cmd[1] = "eval", s.Source()
		v, err = process(ctx, n, cmd, newCmd)
	}
	if err != nil {
		var zero T
		return zero, closed(err)
	}
	return v, nil
}

// process sends one EVAL or EVALSHA (see command) and returns its reply, which go-redis
// decodes straight into what newCmd's command holds: the []int64 that every lock script
// replies, the reply as go-redis reads it (an array as []any), or strings (a reply of another
// shape is an error).
func process[T any, C replyCmd[T]](ctx context.Context, n *Node, cmd []any, newCmd func(context.Context, ...any) C) (T, error) {
	c := newCmd(ctx, cmd...)
	if cmd[2] != 0 {
		c.SetFirstKeyPos(3) // for a cluster client's routing, as go-redis's own Eval does
	}
	_ = n.client.Process(ctx, c)
	return c.Result()
}
