package rueidisfamily

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

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
// connection's breaking failed is sent once more. A call under a context that ends only at
// its deadline (core's, see core.EndsAtDeadline) runs in the caller's goroutine: the driver
// ends it there, with the connection's deadline or its pipeline's wait (conformance's
// context/call-deadline checks), and core does not wait past the deadline for a call it
// runs in a goroutine of its own. A call whose ctx can be cancelled runs in a goroutine of
// its own (ctxcall), on copies of keys and args since it may outlive Eval, which returns at
// ctx's end: the driver honours a cancellation only once the call has a connection
// (conformance's context/cancel/new-connection).
func (n *Node[M, P]) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ctx.Done() == nil || core.EndsAtDeadline(ctx) {
		return n.eval(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]int64, error) { return n.eval(ctx, s, keys, args) })
}

// EvalStrings runs s as Eval does, and returns its reply's elements as strings (see
// core.Node): a nil element (Lua false) is "".
func (n *Node[M, P]) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ctx.Done() == nil || core.EndsAtDeadline(ctx) {
		return n.evalStrings(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), slices.Clone(args) // the call may outlive Eval
	return ctxcall.Go(ctx, func() ([]string, error) { return n.evalStrings(ctx, s, keys, args) })
}

// reply runs s (see Eval) and returns its reply, an array.
func (n *Node[M, P]) reply(ctx context.Context, s *core.Script, keys, args []string) ([]M, error) {
	m, err := n.exec(ctx, s, keys, args)
	if (lostconn.Lost(err) || isCtxErr(err)) && ctx.Err() == nil {
		// The connection broke under the call (a reset, say, or another call's deadline,
		// which fails the connection it ran on, and every call on it, with that call's
		// context error), and the other calls on it failed with it: once more, on the
		// connection the client makes anew. Every core script may run twice with the same
		// arguments: a second acquire finds the lock its own, a second release finds it
		// gone. (go-redis retries such a call itself.)
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

// isCtxErr reports whether err is a context's error.
func isCtxErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
