package rueidisfamily

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-redlock/redlock/backends/internal/ctxcall"
	"github.com/go-redlock/redlock/backends/internal/lostconn"
	"github.com/go-redlock/redlock/core"
)

// Node is a backend's Node over a Client (see backends/rueidis's Node for what it promises).
// M is the driver's reply message, P its pointer. It is safe for concurrent use; it does not
// own the client and never closes it.
type Node[M any, P Message[M]] struct {
	client Client[M]
	name   string
	ps     *pubsub // Subscribe's state; see subscribe.go
	// calls counts the calls under way through the driver; see direct
	calls atomic.Int32
}

// NewNode returns the Node over c, a Client over the driver's client dc, which names the
// Node: the addresses of c, sorted, as "cluster(addr,...)" for a cluster client, or dc's type
// and address for a client that names no server.
func NewNode[M any, P Message[M]](c Client[M], dc any) *Node[M, P] {
	addrs := c.Addrs()
	slices.Sort(addrs)
	name := strings.Join(addrs, ",")
	if v := reflect.ValueOf(dc); name == "" && v.Kind() == reflect.Pointer { // names no server
		name = fmt.Sprintf("%T@%#x", dc, v.Pointer())
	} else if name == "" {
		name = fmt.Sprintf("%T", dc)
	}
	sharded := c.Cluster()
	if sharded {
		name = "cluster(" + name + ")"
	}
	return &Node[M, P]{client: c, name: name, ps: newPubSub(c, sharded)}
}

// String returns the Node's name (see NewNode).
func (n *Node[M, P]) String() string { return n.name }

// Eval runs s, and returns its reply's integers (see core.Node). A call that the
// connection's breaking failed is sent once more; ctx bounds it (see bounded).
func (n *Node[M, P]) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n.direct(ctx) {
		defer n.calls.Add(-1)
		return n.eval(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]int64, error) { defer n.calls.Add(-1); return n.eval(ctx, s, keys, args) })
}

// EvalStrings runs s as Eval does, and returns its reply's elements as strings (see
// core.Node): a nil element (Lua false) is "".
func (n *Node[M, P]) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n.direct(ctx) {
		defer n.calls.Add(-1)
		return n.evalStrings(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]string, error) { defer n.calls.Add(-1); return n.evalStrings(ctx, s, keys, args) })
}

// bounded reports whether the driver ends a call by itself when ctx ends. It honours a
// deadline all along, but a cancellation only once it has a connection; so a call under a
// context that can be cancelled and has no deadline runs in a goroutine of its own
// (ctxcall), on copies of Eval's keys and args since it may outlive Eval, and a connection
// attempt it started goes on until the client's own timeouts.
func bounded(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok || ctx.Done() == nil
}

// direct counts a call in n.calls and reports whether it may run in the caller's
// goroutine: where the driver ends it by itself (bounded) and no other call of n is under
// way. Behind others, the driver does not always honour a deadline: a call queued while
// others waited for a server that did not answer waited, on a loaded machine, until the
// connection closed (conformance's context/deadline/behind-others, about 1 run in 15
// beside two CPU loops), so it runs in a goroutine of its own (ctxcall), which returns at
// ctx's end. A lone call, the uncontended case, allocates nothing more.
func (n *Node[M, P]) direct(ctx context.Context) bool {
	return n.calls.Add(1) == 1 && bounded(ctx)
}

// reply runs s (see Eval) and returns its reply, an array.
func (n *Node[M, P]) reply(ctx context.Context, s *core.Script, keys, args []string) ([]M, error) {
	m, err := n.exec(ctx, s, keys, args)
	if lostconn.Lost(err) && ctx.Err() == nil {
		// The connection broke under the call (a reset, say), and the other calls on it
		// failed with it: once more, on the connection the client makes anew. Every core
		// script may run twice with the same arguments: a second acquire finds the lock
		// its own, a second release finds it gone. (go-redis retries such a call itself.)
		m, err = n.exec(ctx, s, keys, args)
	}
	if err != nil { // a server error, a nil reply, the connection's, or CROSSSLOT (see exec)
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, closed(n.client, serverError(n.client, err))
	}
	arr, err := P(&m).ToArray()
	if err != nil {
		return nil, fmt.Errorf("redlock: %s script: %w", s.Name(), err)
	}
	return arr, nil
}

func (n *Node[M, P]) eval(ctx context.Context, s *core.Script, keys, args []string) ([]int64, error) {
	arr, err := n.reply(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(arr))
	for i := range arr {
		if out[i], err = P(&arr[i]).ToInt64(); err != nil {
			return nil, fmt.Errorf("redlock: %s script replied a non-integer at %d: %w", s.Name(), i, err)
		}
	}
	return out, nil
}

func (n *Node[M, P]) evalStrings(ctx context.Context, s *core.Script, keys, args []string) ([]string, error) {
	arr, err := n.reply(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(arr))
	for i := range arr {
		switch m := P(&arr[i]); {
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

// exec runs s through the client. A cluster client panics while it builds a command whose
// keys lie in different slots, before anything is sent; exec turns that panic into an error
// that matches core.ErrInvalid and says CROSSSLOT, as the server would, so that the lock
// fails at once rather than the process. Any other panic goes on.
func (n *Node[M, P]) exec(ctx context.Context, s *core.Script, keys, args []string) (m M, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ := r.(string)
			if !strings.Contains(msg, "different key slots") {
				panic(r)
			}
			err = fmt.Errorf("%w: CROSSSLOT keys in request don't hash to the same slot (%s: %s)", core.ErrInvalid, n.client.Names().Driver, msg)
		}
	}()
	return n.client.Eval(ctx, s, keys, args)
}
