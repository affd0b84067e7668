package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redlock/redlock/core"
)

// Node is a minimal redlock backend written from scratch: a core.Node that speaks RESP2 to
// one Redis server over plain TCP connections, with a small pool of idle ones. A backend for
// any other driver has the same four duties: send EVALSHA and fall back to EVAL on NOSCRIPT,
// honour ctx, return error replies as errors, and convert the reply to []int64 (Eval) or
// []string (EvalStrings). It holds no
// lock logic: that lives in core. A Node is safe for concurrent use.
type Node struct {
	addr   string
	idle   chan *conn // idle connections, ready for the next call
	closed atomic.Bool
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

// redisError is an error reply from the server, such as "NOSCRIPT ..." or "WRONGTYPE ...".
type redisError string

func (e redisError) Error() string { return string(e) }

// NewNode returns the Node for the Redis server at addr ("host:port"). It connects lazily.
func NewNode(addr string) *Node { return &Node{addr: addr, idle: make(chan *conn, 8)} }

// String names the node in redlock's errors.
func (n *Node) String() string { return n.addr }

// Close closes the idle connections; every call after it fails with an error that matches
// core.ErrClosed, which tells redlock to stop at once rather than retry the node. Call it
// once the Node is no longer used.
func (n *Node) Close() {
	n.closed.Store(true)
	for {
		select {
		case c := <-n.idle:
			c.Close()
		default:
			return
		}
	}
}

// Eval runs s on the server: EVALSHA, and EVAL if the server does not have the script.
func (n *Node) Eval(ctx context.Context, s *core.Script, keys []string, args ...string) ([]int64, error) {
	reply, err := n.run(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return core.Ints(s, reply)
}

// EvalStrings runs s as Eval does, for a reply whose elements may be bulk strings.
func (n *Node) EvalStrings(ctx context.Context, s *core.Script, keys []string, args ...string) ([]string, error) {
	reply, err := n.run(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return core.Strings(s, reply)
}

// run sends s with keys and args, and returns the reply as read decodes it; an error reply
// is an error.
func (n *Node) run(ctx context.Context, s *core.Script, keys, args []string) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n.closed.Load() {
		return nil, fmt.Errorf("%w: custombackend: the node is closed", core.ErrClosed)
	}
	c, err := n.get(ctx)
	if err != nil {
		return nil, err
	}
	// ctx's deadline bounds every read and write; cancelling ctx moves the deadline into
	// the past, which wakes a blocked read at once.
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })

	reply, err := c.do("EVALSHA", s.SHA1(), keys, args)
	if e, ok := reply.(redisError); ok && strings.HasPrefix(string(e), "NOSCRIPT") {
		reply, err = c.do("EVAL", s.Source(), keys, args)
	}
	if stopped := stop(); err != nil || !stopped {
		c.Close() // broken, or ctx ended: the connection may be mid-reply
	} else {
		n.put(c)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if e, ok := reply.(redisError); ok {
		return nil, e
	}
	return reply, nil
}

// get returns an idle connection, or dials a new one.
func (n *Node) get(ctx context.Context) (*conn, error) {
	select {
	case c := <-n.idle:
		return c, nil
	default:
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", n.addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc, bufio.NewReader(nc)}, nil
}

// put keeps c for the next call, or closes it if enough are idle or the Node is closed.
func (n *Node) put(c *conn) {
	if n.closed.Load() {
		c.Close()
		return
	}
	select {
	case n.idle <- c:
	default:
		c.Close()
	}
}

// do sends "cmd script numkeys keys... args..." and reads the reply. An error reply is
// returned as a redisError value: the connection is still in sync after it.
func (c *conn) do(cmd, script string, keys, args []string) (any, error) {
	words := append([]string{cmd, script, strconv.Itoa(len(keys))}, keys...)
	words = append(words, args...)
	b := fmt.Appendf(nil, "*%d\r\n", len(words))
	for _, w := range words { // bulk strings carry any bytes: binary-safe
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(w), w)
	}
	if _, err := c.Write(b); err != nil {
		return nil, err
	}
	return read(c.r)
}

// read reads one RESP2 reply: string, redisError, int64, nil or []any.
func read(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("custombackend: malformed reply %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return redisError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		size, err := strconv.Atoi(body)
		if err != nil || size < 0 {
			return nil, err
		}
		buf := make([]byte, size+2)
		_, err = io.ReadFull(r, buf)
		return string(buf[:size]), err
	case '*':
		size, err := strconv.Atoi(body)
		if err != nil || size < 0 {
			return nil, err
		}
		arr := make([]any, size)
		for i := range arr {
			if arr[i], err = read(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("custombackend: unknown reply type %q", line[0])
}
