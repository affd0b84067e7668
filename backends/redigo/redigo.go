// Package redigo is the redlock backend for redigo (github.com/gomodule/redigo): a core.Node
// over a pool of connections to one Redis master, such as a *redis.Pool.
//
// redigo has no Redis Cluster client: its connections do not follow MOVED redirections, so
// a Node of this package reaches a Redis Cluster only if one master serves all 16384 slots
// (a one-node cluster). For a cluster of several masters, use the go-redis or rueidis
// backend with that driver's cluster client.
package redigo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	redargv "github.com/go-redlock/redlock/backends/internal/argv"
	"github.com/go-redlock/redlock/backends/internal/lostconn"
	"github.com/go-redlock/redlock/core"
	"github.com/gomodule/redigo/redis"
)

// shas holds each core script's SHA1 as an any, boxed once rather than on every call.
var shas = func() map[*core.Script]any {
	m := make(map[*core.Script]any)
	for _, s := range core.Scripts() {
		m[s] = s.SHA1()
	}
	return m
}()

// Pool hands out connections to one Redis server. *redis.Pool satisfies it. A connection
// is closed after each use (which returns a pooled one to its pool). Its connections must
// implement redis.ConnWithContext and redis.ConnWithTimeout, as redigo's own do.
type Pool interface {
	GetContext(ctx context.Context) (redis.Conn, error)
}

// Node is one Redis master reached through a redigo pool. It is safe for concurrent use. A
// Node made by New does not own the pool and never closes it; one made by Dial owns the
// pool it made, and its Close closes it.
type Node struct {
	pool  Pool
	name  string
	ps    *pubsub     // Subscribe's state; see subscribe.go
	owned *redis.Pool // the pool Dial made, which Close closes; nil for New's
}

var (
	_ core.Node = (*Node)(nil)
)

// New returns the Node for pool. name names the node in errors, usually the server's
// address ("10.0.0.1:6379"): a pool does not know its address. An empty name is replaced
// by one made from the pool: its type and address for a pool that is a pointer, such as
// "*redis.Pool@0xc000123456", which is the same for every Node of that pool; for another
// pool, its type and the Node's address. Either way distinct pools get distinct names. New of a nil pool returns nil, which redlock.New rejects.
//
// Each Node's pool should be its own: Redlock needs N independent masters. Eval takes one
// connection per call; Subscribe keeps one more for pub/sub (see Subscribe), so a pool with
// MaxActive set needs room for it. Give the pool a DialContext, so that dialling honours the
// caller's context too.
func New(pool Pool, name string) *Node {
	if pool == nil || reflect.ValueOf(pool).Kind() == reflect.Pointer && reflect.ValueOf(pool).IsNil() {
		return nil
	}
	n := &Node{pool: pool, name: name, ps: newPubSub(pool)}
	switch {
	case name != "":
	case reflect.ValueOf(pool).Kind() == reflect.Pointer:
		n.name = fmt.Sprintf("%T@%p", pool, pool)
	default: // no identity of its own: the Node's
		n.name = fmt.Sprintf("%T@%p", pool, n)
	}
	return n
}

// String returns the name given to New, or the one New made for an empty name.
func (n *Node) String() string { return n.name }

// Eval runs s with EVALSHA, and with EVAL when the server does not have the script yet.
//
// It honours ctx through redis.DoContext: when ctx ends first, redigo closes the connection
// (the pool then drops it) and Eval returns ctx's error. A call whose connection broke under
// it (a reset, say) is sent again on another connection of the pool, up to three times,
// within ctx. A server error reply, such as WRONGTYPE, is returned as a redis.Error.
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.run(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return core.Ints(s, v)
}

// EvalStrings runs s as Eval does, and returns its reply's elements as strings (see
// core.Node): a nil element is "".
func (n *Node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	v, err := n.run(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return core.Strings(s, v)
}

// run sends s with keys and args (see Eval) and returns the reply as redigo decodes it.
func (n *Node) run(ctx context.Context, s *core.Script, keys, args []string) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	argv := make([]any, 0, 2+len(keys)+len(args))
	sha, ok := shas[s]
	if !ok { // not a core script
		sha = s.SHA1()
	}
	argv = append(argv, sha, len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = redargv.Append(argv, args...)
	v, err := n.eval(ctx, s, sha, argv)
	// A connection that broke under the call (a reset, say) is dropped from the pool, and
	// the call sent again on another, up to lostRetries times: the pool's idle connections
	// to that server may have broken with it. Every core script may run twice with the same
	// arguments: a second acquire finds the lock its own, a second release finds it gone.
	// (go-redis retries such a call itself.)
	for i := 0; i < lostRetries && lostconn.Lost(err) && ctx.Err() == nil; i++ {
		v, err = n.eval(ctx, s, sha, argv)
	}
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	return v, nil
}

// lostRetries is how many times Eval sends again a call whose connection broke under it.
const lostRetries = 3

// eval sends EVALSHA sha argv on a connection of the pool, and EVAL with s's source
// instead if the server does not have the script yet.
func (n *Node) eval(ctx context.Context, s *core.Script, sha any, argv []any) (any, error) {
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	argv[0] = sha
	v, err := redis.DoContext(conn, ctx, "EVALSHA", argv...)
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(string(rerr), "NOSCRIPT") {
		argv[0] = s.Source()
		v, err = redis.DoContext(conn, ctx, "EVAL", argv...)
	}
	return v, err
}

// ctxErr returns ctx's error once ctx has ended, whatever redigo made of it (a read
// deadline, a closed connection), and err otherwise, made to match core.ErrClosed too if
// the pool is closed. redigo's read deadline is ctx's, so it
// may fire a moment before ctx reports it.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return closed(err)
}

// closed returns err, made to match core.ErrClosed too if it says the pool is closed.
func closed(err error) error {
	if err != nil && err.Error() == poolClosed { // redigo exports no value for it
		return fmt.Errorf("%w: %w", core.ErrClosed, err)
	}
	return err
}

// poolClosed is the error of a Get on a closed redigo pool.
const poolClosed = "redigo: get on closed pool"
