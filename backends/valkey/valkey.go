// Package valkey is the redlock backend for valkey-go (github.com/valkey-io/valkey-go): a
// core.Node over a valkey.Client, standalone, sentinel or cluster. It implements
// core.Setter (the plain SET NX fast path) and core.Subscriber (release notifications over
// pub/sub, SSUBSCRIBE on a cluster client), as the rueidis backend does: valkey-go is a fork
// of rueidis, and the two backends differ in little but the driver's names.
//
// Its name is the driver's: import one of the two under another name, for example
//
//	import rlvalkey "github.com/go-redlock/redlock/backends/valkey"
//
// Servers: the backend's tests and the conformance suite pass against miniredis, and
// against valkey-server 8.0.1 and redis-server 7.0.15, each standalone, as a real 3-master
// cluster and behind a Sentinel (make test-valkey runs them on Valkey).
package valkey

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-redlock/redlock/backends/internal/ctxcall"
	"github.com/go-redlock/redlock/backends/internal/lostconn"
	"github.com/go-redlock/redlock/core"
	"github.com/valkey-io/valkey-go"
)

// Node is one Redis or Valkey master (or one cluster of them) reached through a valkey-go
// client. It is safe for concurrent use. It does not own the client and never closes it:
// close the Node (which ends its subscriptions) first, then the client.
type Node struct {
	client valkey.Client
	name   string
	ps     *pubsub // the Subscriber's state; see subscribe.go
}

var (
	_ core.Node   = (*Node)(nil)
	_ core.Setter = (*Node)(nil)
)

// scripts maps each core script to its valkey.Lua, built once for the process: Lua.Exec
// sends EVALSHA, and EVAL when the server answers NOSCRIPT, through the client's
// auto-pipelining.
var scripts = func() map[*core.Script]*valkey.Lua {
	m := make(map[*core.Script]*valkey.Lua, len(core.Scripts()))
	for _, s := range core.Scripts() {
		m[s] = valkey.NewLuaScript(s.Source())
	}
	return m
}()

// New returns the Node for c, built with valkey.NewClient. valkey-go finds a cluster by
// itself; the Node of a cluster client subscribes with SSUBSCRIBE and has core publish
// releases with SPUBLISH. New(nil) returns nil, which redlock.New rejects.
//
// valkey.NewClient fails while the server is down; to start all the same, make the node
// with NewLazy, which makes its client on first use.
//
// Redlock needs N independent masters: give each its own client. Give each client a single
// Node, too: valkey-go keeps one subscription per channel and client, so one Node's
// unsubscribe would end another's. Lock scripts are writes: a standalone client with
// ReplicaAddress must not let its SendToReplicas pick EVAL, EVALSHA or SET.
//
// miniredis needs ClientOption{AlwaysRESP2: true, DisableCache: true, ForceSingleClient:
// true}: it runs no command on a subscribed RESP3 connection (valkey-go subscribes on its
// command connection under RESP3), has no client-side caching, and would be probed as a
// cluster. A real server needs none of them.
//
// Set ClientOption.AlwaysPipelining where a server may be slow. Without it, a call made
// while no other is under way puts its context's deadline on the connection, and a call
// that the node timeout ends closes the connection: the next call then waits for a new
// one's handshake first, two round trips in all, so a server more than half the node
// timeout away misses every other call. With it, a timed-out call leaves the connection
// open and the next costs one round trip.
func New(c valkey.Client) *Node {
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
	sharded := c.Mode() == valkey.ClientModeCluster
	if sharded {
		name = "cluster(" + name + ")"
	}
	return &Node{client: c, name: name, ps: newPubSub(c, sharded)}
}

// String names the node in errors: the server's address (addresses, comma-separated, for a
// client that knows several), or "cluster(addr,...)" for a cluster client, as the client
// knew its nodes when New was called; for a client that named none, its type and address.
func (n *Node) String() string { return n.name }

// Eval runs s on the server with EVALSHA, falling back to EVAL when the server does not
// have the script yet, and returns the script's integer array reply. Concurrent calls share
// the client's pipelined connection; a call that the connection's breaking (a reset, say)
// failed is sent once more, within ctx. Eval returns when ctx ends, with ctx's error. A server
// error reply, such as WRONGTYPE, is an error that unwraps to a *valkey.ValkeyError, with the
// server's message (see serverError); on a closed client the error
// matches core.ErrClosed; on a cluster client, keys of different slots are an error that
// matches core.ErrInvalid (nothing is sent).
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if bounded(ctx) {
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
	if bounded(ctx) {
		return n.evalStrings(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]string, error) { return n.evalStrings(ctx, s, keys, args) })
}

// SetNX implements core.Setter: SET key value NX PX ttl, true when it set the key, false
// (and no error) when the key exists. ttl is sent in whole milliseconds; under a
// millisecond SetNX returns an error and sends nothing. It honours ctx and reports a closed
// client as Eval does.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if ttl < time.Millisecond { // PX 0 is a server error; a key without expiry is worse
		return false, fmt.Errorf("redlock: SET NX with a TTL of %v: want at least 1ms", ttl)
	}
	if bounded(ctx) {
		return n.setNX(ctx, key, value, ttl)
	}
	return ctxcall.Go(ctx, func() (bool, error) { return n.setNX(ctx, key, value, ttl) })
}

func (n *Node) setNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	cmd := n.client.B().Set().Key(key).Value(value).Nx().PxMilliseconds(ttl.Milliseconds()).Build()
	err := n.client.Do(ctx, cmd).Error()
	switch {
	case err == nil:
		return true, nil
	case valkey.IsValkeyNil(err): // a nil reply: NX found the key
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, closed(serverError(err))
}

// bounded reports whether valkey-go ends a call by itself when ctx ends. It honours a
// deadline all along, but a cancellation only once it has a connection; so a call under a
// context that can be cancelled and has no deadline runs in a goroutine of its own
// (ctxcall), on copies of Eval's keys and args since it may outlive Eval, and a connection
// attempt it started goes on until the client's own timeouts.
func bounded(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok || ctx.Done() == nil
}

// closed returns err, wrapped to match core.ErrClosed as well when it says the client was
// closed, so that core gives up on the node at once instead of retrying it.
func closed(err error) error {
	if errors.Is(err, valkey.ErrClosing) {
		return fmt.Errorf("%w: %w", core.ErrClosed, err)
	}
	return err
}

// reply runs s (see Eval) and returns its reply, an array.
func (n *Node) reply(ctx context.Context, s *core.Script, keys, args []string) ([]valkey.ValkeyMessage, error) {
	lua := scripts[s]
	if lua == nil { // not one of core's scripts: built for this call only
		lua = valkey.NewLuaScript(s.Source())
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
	if err := resp.Error(); err != nil { // a server error, a nil reply, or the connection's
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

// exec runs lua through c. valkey-go's cluster client panics while it builds a command whose
// keys lie in different slots, before anything is sent; exec turns that panic into an error
// that matches core.ErrInvalid and says CROSSSLOT, as the server would, so that the lock
// fails at once rather than the process. Any other panic goes on.
func exec(ctx context.Context, lua *valkey.Lua, c valkey.Client, keys, args []string) (resp valkey.ValkeyResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ := r.(string)
			if !strings.Contains(msg, "different key slots") {
				panic(r)
			}
			err = fmt.Errorf("%w: CROSSSLOT keys in request don't hash to the same slot (valkey-go: %s)", core.ErrInvalid, msg)
		}
	}()
	return lua.Exec(ctx, c, keys, args), nil
}

// serverError returns a server's error reply with the message the server sent: valkey-go drops
// the "ERR " that starts most replies (ValkeyError.Error gives "Error running script ..." for
// "ERR Error running script ..."), and core.Permanent knows a reply by its start. A message
// whose first word is not an upper-case error code (WRONGTYPE, NOSCRIPT, CROSSSLOT...) had
// that "ERR " in front. The result unwraps to the *valkey.ValkeyError; any other error, and a nil
// reply, is returned as it is.
func serverError(err error) error {
	var re *valkey.ValkeyError
	if !errors.As(err, &re) || re.IsNil() {
		return err
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	if code != "" && strings.ToUpper(code) == code {
		return err
	}
	return &errReply{msg: "ERR " + re.Error(), err: err}
}

// errReply is a server's error reply whose "ERR " valkey-go dropped, with it put back.
type errReply struct {
	msg string
	err error // the driver's *valkey.ValkeyError
}

func (e *errReply) Error() string { return e.msg }

func (e *errReply) Unwrap() error { return e.err }
