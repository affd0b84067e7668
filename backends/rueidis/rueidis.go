// Package rueidis is the redlock backend for rueidis (github.com/redis/rueidis): a core.Node
// over a rueidis.Client, standalone, sentinel or cluster.
//
// Its name is the driver's: import one of the two under another name, for example
//
//	import rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
package rueidis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/backends/internal/ctxcall"
	"github.com/go-redlock/redlock/backends/internal/lostconn"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/rueidis"
)

// Node is one Redis master (or one Redis Cluster) reached through a rueidis client. It is
// safe for concurrent use; it does not own the client and never closes it.
type Node struct {
	client rueidis.Client
	name   string
	ps     *pubsub               // Subscribe's state; see subscribe.go
	px     atomic.Pointer[pxArg] // the last SetNX's PX argument; see pxArg
}

var (
	_ core.Node   = (*Node)(nil)
	_ core.Setter = (*Node)(nil)
)

// scripts holds one rueidis.Lua per core script, made once: rueidis.Lua.Exec sends EVALSHA
// and falls back to EVAL on NOSCRIPT, through the client's auto-pipelining.
var scripts = func() map[*core.Script]*rueidis.Lua {
	m := make(map[*core.Script]*rueidis.Lua)
	for _, s := range core.Scripts() {
		m[s] = rueidis.NewLuaScript(s.Source())
	}
	return m
}()

// New returns the Node for c. Build c with rueidis.NewClient; a cluster client (rueidis
// detects Redis Cluster by itself) subscribes with SSUBSCRIBE. New of a nil client returns
// nil, which redlock.New rejects.
//
// rueidis.NewClient fails while the server is down; to start all the same, make the node
// with NewLazy, which makes its client on first use.
//
// Each Node's client should be its own: Redlock needs N independent masters. Give each
// client a single Node: one Node's unsubscribe ends rueidis's subscription to that channel
// for the whole client. miniredis needs ClientOption{AlwaysRESP2: true, DisableCache: true,
// ForceSingleClient: true}: it runs no command on a subscribed RESP3 connection (where
// rueidis subscribes), has no client-side caching, and would pass for a cluster.
//
// Set ClientOption.AlwaysPipelining where a server may be slow. Without it, a call made
// while no other is under way puts its context's deadline on the connection, and a call
// that the node timeout ends closes the connection: the next call then waits for a new
// one's handshake first, two round trips in all, so a server more than half the node
// timeout away misses every other call. With it, a timed-out call leaves the connection
// open and the next costs one round trip.
func New(c rueidis.Client) *Node {
	if c == nil {
		return nil
	}
	addrs := make([]string, 0, 1)
	for addr := range c.Nodes() {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	name := strings.Join(addrs, ",")
	if v := reflect.ValueOf(c); name == "" && v.Kind() == reflect.Pointer { // names no server
		name = fmt.Sprintf("%T@%#x", c, v.Pointer())
	} else if name == "" {
		name = fmt.Sprintf("%T", c)
	}
	sharded := c.Mode() == rueidis.ClientModeCluster
	if sharded {
		name = "cluster(" + name + ")"
	}
	return &Node{client: c, name: name, ps: newPubSub(c, sharded)}
}

// String returns the server's address, or "cluster(addr,...)" for a cluster client; for a
// client that names no server (Nodes is empty), its type and address.
func (n *Node) String() string { return n.name }

// Eval runs s with EVALSHA, and with EVAL when the server does not have the script yet.
// Concurrent calls share the client's pipelined connection; a call that the connection's
// breaking (a reset, say) failed is sent once more, within ctx. Eval returns when ctx ends,
// with ctx's error. A server error reply, such as WRONGTYPE, is an error that unwraps to a
// *rueidis.RedisError and whose message is the server's (see serverError).
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if direct(ctx) {
		return n.eval(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]int64, error) { return n.eval(ctx, s, keys, args) })
}

// EvalStrings runs s as Eval does, and returns its reply's elements as strings (see
// core.Node): a nil element (Lua false) is "".
func (n *Node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if direct(ctx) {
		return n.evalStrings(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]string, error) { return n.evalStrings(ctx, s, keys, args) })
}

// SetNX runs SET key value NX PX ttl (see core.Setter) through the client's pipelined
// connection. It honours ctx as Eval does.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if ttl < time.Millisecond { // PX 0 is an error; go-redis would send no expiry at all
		return false, fmt.Errorf("redlock: SET NX with a TTL of %v: want at least 1ms", ttl)
	}
	if direct(ctx) {
		return n.setNX(ctx, key, value, ttl)
	}
	return ctxcall.Go(ctx, func() (bool, error) { return n.setNX(ctx, key, value, ttl) })
}

func (n *Node) setNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	// SET key value NX PX ms, built as an arbitrary command so that its PX argument can be
	// the string made once per TTL (the typed builder formats the number on every call).
	cmd := n.client.B().Arbitrary("SET").Keys(key).Args(value, "NX", "PX", n.pxArg(ttl)).Build()
	err := n.client.Do(ctx, cmd).Error()
	switch {
	case err == nil:
		return true, nil
	case rueidis.IsRedisNil(err): // NX: the key exists
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, closed(serverError(err))
}

// pxArg is a TTL in milliseconds and its decimal form, SET's PX argument.
type pxArg struct {
	ms  int64
	arg string
}

// pxArg returns ttl's whole milliseconds in decimal. A Node keeps the last one it made: a
// Client's locks mostly share one TTL, and a lock's first attempt sends SET NX with it.
func (n *Node) pxArg(ttl time.Duration) string {
	ms := ttl.Milliseconds()
	if p := n.px.Load(); p != nil && p.ms == ms {
		return p.arg
	}
	p := &pxArg{ms: ms, arg: strconv.FormatInt(ms, 10)}
	n.px.Store(p)
	return p.arg
}

// closed returns err, made to match core.ErrClosed too if it says the client was closed.
func closed(err error) error {
	if errors.Is(err, rueidis.ErrClosing) {
		return fmt.Errorf("%w: %w", core.ErrClosed, err)
	}
	return err
}

// direct reports whether rueidis itself ends a call when ctx ends: it honours a deadline
// throughout, but a cancellation only once connected, so a call under a cancellable ctx
// without a deadline runs in a goroutine of its own, on copies of Eval's keys and args (it
// may go on after Eval returned, and a connection it opens until its own timeouts).
func direct(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok || ctx.Done() == nil
}

// reply runs s (see Eval) and returns its reply, an array.
func (n *Node) reply(ctx context.Context, s *core.Script, keys, args []string) ([]rueidis.RedisMessage, error) {
	lua := scripts[s]
	if lua == nil { // not a core script: used once, not kept
		lua = rueidis.NewLuaScript(s.Source())
	}
	resp, err := exec(ctx, lua, n.client, keys, args)
	if err == nil && lostconn.Lost(resp.Error()) && ctx.Err() == nil {
		// The connection broke under the call (a reset, say), and the other calls on it
		// failed with it: once more, on the connection the client makes anew. Every core
		// script may run twice with the same arguments: a second acquire finds the lock
		// its own, a second release finds it gone. (go-redis retries such a call itself.)
		resp, err = exec(ctx, lua, n.client, keys, args)
	}
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil { // a server error, rueidis.Nil, or the connection's
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, closed(serverError(err))
	}
	arr, err := resp.ToArray()
	if err != nil {
		return nil, fmt.Errorf("redlock: %s script: %w", s.Name(), err)
	}
	return arr, nil
}

func (n *Node) eval(ctx context.Context, s *core.Script, keys, args []string) ([]int64, error) {
	arr, err := n.reply(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(arr))
	for i := range arr {
		if out[i], err = arr[i].ToInt64(); err != nil {
			return nil, fmt.Errorf("redlock: %s script replied a non-integer at %d: %w", s.Name(), i, err)
		}
	}
	return out, nil
}

func (n *Node) evalStrings(ctx context.Context, s *core.Script, keys, args []string) ([]string, error) {
	arr, err := n.reply(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(arr))
	for i := range arr {
		switch m := &arr[i]; {
		case m.IsString():
			out[i], _ = m.ToString()
		case m.IsInt64():
			v, _ := m.ToInt64()
			out[i] = strconv.FormatInt(v, 10)
		case m.IsNil():
		default:
			return nil, fmt.Errorf("redlock: %s script replied neither a string nor an integer at %d", s.Name(), i)
		}
	}
	return out, nil
}

// exec runs lua through c. A cluster client panics, before sending anything, on keys of
// different slots; exec returns that as an error matching core.ErrInvalid that says
// CROSSSLOT, as the server would, so that the lock fails at once. Other panics go on.
func exec(ctx context.Context, lua *rueidis.Lua, c rueidis.Client, keys, args []string) (resp rueidis.RedisResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ := r.(string)
			if !strings.Contains(msg, "different key slots") {
				panic(r)
			}
			err = fmt.Errorf("%w: CROSSSLOT keys in request don't hash to the same slot (rueidis: %s)", core.ErrInvalid, msg)
		}
	}()
	return lua.Exec(ctx, c, keys, args), nil
}

// serverError returns a server's error reply with the message the server sent: rueidis drops
// the "ERR " that starts most replies (RedisError.Error gives "Error running script ..." for
// "ERR Error running script ..."), and core.Permanent knows a reply by its start. A message
// whose first word is not an upper-case error code (WRONGTYPE, NOSCRIPT, CROSSSLOT...) had
// that "ERR " in front. The result unwraps to the *rueidis.RedisError; any other error, and a nil
// reply, is returned as it is.
func serverError(err error) error {
	var re *rueidis.RedisError
	if !errors.As(err, &re) || re.IsNil() {
		return err
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	if code != "" && strings.ToUpper(code) == code {
		return err
	}
	return &errReply{msg: "ERR " + re.Error(), err: err}
}

// errReply is a server's error reply whose "ERR " rueidis dropped, with it put back.
type errReply struct {
	msg string
	err error // the driver's *rueidis.RedisError
}

func (e *errReply) Error() string { return e.msg }

func (e *errReply) Unwrap() error { return e.err }
