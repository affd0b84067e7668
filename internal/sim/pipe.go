package sim

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// pipe returns the two ends of an in-memory connection whose writes never block: each
// direction is an unbounded buffer, as a socket's kernel buffers are for the small
// exchanges of a lock. net.Pipe, which miniredis's Dial uses, blocks each write until the
// other end reads it, and go-redis's pub/sub connection holds a lock while it writes a
// SUBSCRIBE that the server does not read while it blocks on writing a message that the
// reader, waiting for that lock, does not read. Reads honour read deadlines, so a driver's
// timeouts work; blocked reads wait on channels, which keeps the bubble's clock moving.
func pipe() (net.Conn, net.Conn) {
	a, b := newPipeBuf(), newPipeBuf()
	return newEnd(a, b), newEnd(b, a)
}

// pipeBuf is one direction of a pipe.
type pipeBuf struct {
	mu     sync.Mutex
	data   []byte
	closed bool          // its writer closed: reads return EOF once it is drained
	ready  chan struct{} // signalled when data arrives or the writer closes
}

func newPipeBuf() *pipeBuf { return &pipeBuf{ready: make(chan struct{}, 1)} }

func (b *pipeBuf) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *pipeBuf) write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	b.data = append(b.data, p...)
	b.mu.Unlock()
	b.signal()
	return len(p), nil
}

// read reads what is there; done reports that nothing ever will be (EOF).
func (b *pipeBuf) read(p []byte) (n int, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = copy(p, b.data)
	b.data = b.data[n:]
	if len(b.data) == 0 {
		b.data = nil
	}
	return n, n == 0 && b.closed
}

func (b *pipeBuf) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
}

// end is one end of a pipe: it reads in and writes out.
type end struct {
	in, out *pipeBuf

	mu       sync.Mutex
	deadline time.Time     // for reads
	closed   bool          // this end closed
	wake     chan struct{} // signalled when the deadline changes or this end closes
}

func newEnd(in, out *pipeBuf) *end { return &end{in: in, out: out, wake: make(chan struct{}, 1)} }

func (e *end) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		e.mu.Lock()
		closed, dl := e.closed, e.deadline
		e.mu.Unlock()
		if closed {
			return 0, net.ErrClosed
		}
		if n, eof := e.in.read(p); n > 0 || eof {
			if eof {
				return 0, io.EOF
			}
			return n, nil
		}
		var timeout <-chan time.Time
		var t *time.Timer
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t = time.NewTimer(d)
			timeout = t.C
		}
		select {
		case <-e.in.ready:
		case <-e.wake:
		case <-timeout:
		}
		if t != nil {
			t.Stop()
		}
	}
}

func (e *end) Write(p []byte) (int, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	return e.out.write(p)
}

func (e *end) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.out.close()
	e.in.close()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

func (e *end) SetReadDeadline(t time.Time) error {
	e.mu.Lock()
	e.deadline = t
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

func (e *end) SetDeadline(t time.Time) error    { return e.SetReadDeadline(t) }
func (e *end) SetWriteDeadline(time.Time) error { return nil }
func (e *end) LocalAddr() net.Addr              { return pipeAddr{} }
func (e *end) RemoteAddr() net.Addr             { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
