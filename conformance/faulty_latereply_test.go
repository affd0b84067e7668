package conformance_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
)

// dropsWaiter is a pipelining Node of its own over one connection, as rueidis and
// valkey-go pipeline: every call writes its command and queues for its reply, and a reader
// hands the replies out in order. When a call's context ends first, it takes itself out of
// the queue (the fault): the late reply then goes to the next call in the queue, which
// returns it as its own. It sends EVALSHA, with EVAL after NOSCRIPT, honours ctx, and dials
// again after its connection broke; it is no Setter nor Subscriber.
type dropsWaiter struct {
	addr string

	mu     sync.Mutex // guards the fields below; held while a command is written
	pc     *pipeConn  // nil until dialled, and once broken
	closed bool
}

// pipeConn is one connection of a dropsWaiter, and the calls waiting for its replies.
type pipeConn struct {
	conn    net.Conn
	waiters []chan pipeReply // in the order their commands were written
}

type pipeReply struct {
	v   any
	err error
}

func newDropsWaiter(t testing.TB, addr string) core.Node {
	n := &dropsWaiter{addr: addr}
	t.Cleanup(n.close)
	onCloseClients(t, n.close)
	return n
}

func (n *dropsWaiter) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.pc != nil {
		_ = n.pc.conn.Close()
	}
}

func (n *dropsWaiter) String() string { return n.addr }

// send writes args as one command and returns the connection and the channel its reply
// will come on.
func (n *dropsWaiter) send(ctx context.Context, args []string) (*pipeConn, chan pipeReply, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, nil, fmt.Errorf("%w: dropsWaiter %s", core.ErrClosed, n.addr)
	}
	if n.pc == nil {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", n.addr)
		if err != nil {
			return nil, nil, err
		}
		n.pc = &pipeConn{conn: conn}
		go n.read(n.pc)
	}
	pc := n.pc
	ch := make(chan pipeReply, 1)
	pc.waiters = append(pc.waiters, ch)
	if _, err := pc.conn.Write(redistest.EncodeCommand(args)); err != nil {
		_ = pc.conn.Close() // the reader fails every waiter
	}
	return pc, ch, nil
}

// read hands pc's replies to its waiters, in order, until the connection breaks; then it
// fails every waiter left.
func (n *dropsWaiter) read(pc *pipeConn) {
	r := bufio.NewReader(pc.conn)
	for {
		v, err := redistest.ReadReply(r)
		n.mu.Lock()
		if err != nil {
			if n.pc == pc {
				n.pc = nil
			}
			waiters := pc.waiters
			pc.waiters = nil
			n.mu.Unlock()
			_ = pc.conn.Close()
			for _, w := range waiters {
				w <- pipeReply{err: err}
			}
			return
		}
		if len(pc.waiters) == 0 {
			n.mu.Unlock()
			continue
		}
		w := pc.waiters[0]
		pc.waiters = pc.waiters[1:]
		n.mu.Unlock()
		w <- pipeReply{v: v}
	}
}

// do sends args and returns the reply, or ctx's error when ctx ends first.
func (n *dropsWaiter) do(ctx context.Context, args []string) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pc, ch, err := n.send(ctx, args)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		// The fault: the call leaves the queue, so its reply, when it comes, is handed to
		// the call queued behind it. (A right one would leave its place, to be skipped.)
		n.mu.Lock()
		pc.waiters = slices.DeleteFunc(pc.waiters, func(w chan pipeReply) bool { return w == ch })
		n.mu.Unlock()
		return nil, ctx.Err()
	}
}

// eval runs s with EVALSHA, and EVAL after NOSCRIPT, and returns the reply; an error reply
// is the error.
func (n *dropsWaiter) eval(ctx context.Context, s *core.Script, keys, args []string) (any, error) {
	argv := append([]string{"EVALSHA", s.SHA1(), strconv.Itoa(len(keys))}, keys...)
	argv = append(argv, args...)
	v, err := n.do(ctx, argv)
	if e, ok := v.(error); ok && err == nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
		argv[0], argv[1] = "EVAL", s.Source()
		v, err = n.do(ctx, argv)
	}
	if err != nil {
		return nil, err
	}
	if e, ok := v.(error); ok {
		return nil, e
	}
	return v, nil
}

func (n *dropsWaiter) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	v, err := n.eval(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return core.Ints(s, v)
}

func (n *dropsWaiter) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	v, err := n.eval(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return core.Strings(s, v)
}
