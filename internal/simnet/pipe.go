package simnet

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Pipe returns the two ends of an in-memory connection whose writes never block: each
// direction is an unbounded buffer, as a socket's kernel buffers are for the small
// exchanges of a lock. net.Pipe, which miniredis's own Dial uses, blocks each write until
// the other end reads it, which deadlocks go-redis's pub/sub: its connection holds a lock
// while it writes a SUBSCRIBE that the server does not read while the server blocks on
// writing a message that the reader, waiting for that lock, does not read.
//
// Reads honour read deadlines (SetDeadline and SetReadDeadline), so a driver's timeouts
// work; write deadlines are accepted and ignored, as a write never waits. A blocked read
// waits on channels, which inside a synctest bubble is durably blocking, so the bubble's
// clock keeps moving. Closing either end makes the other end's reads return io.EOF once
// they have drained what was written, and its writes fail with io.ErrClosedPipe.
func Pipe() (net.Conn, net.Conn) {
	a, b := newBuffer(), newBuffer()
	return newEnd(a, b), newEnd(b, a)
}

// buffer is one direction of a pipe.
type buffer struct {
	mu     sync.Mutex
	data   []byte        // what was written and not yet read, from off on
	off    int           // how much of data was read
	closed bool          // an end closed: reads return EOF once it is drained
	ready  chan struct{} // signalled when data arrives or the buffer closes
	link   *Link         // the data stays here while it is cut (see PipeVia); nil: never cut
}

func newBuffer() *buffer { return &buffer{ready: make(chan struct{}, 1)} }

// signal wakes the reader, if it waits.
func (b *buffer) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *buffer) write(p []byte) (int, error) {
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

// keptCap is the largest buffer that a pipe keeps once read to the end, for the writes
// after: a lock's requests and replies take a few hundred bytes.
const keptCap = 64 << 10

// read copies what is there into p; eof reports that nothing ever will be.
func (b *buffer) read(p []byte) (n int, eof bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = copy(p, b.data[b.off:])
	b.off += n
	if b.off == len(b.data) {
		b.off = 0
		if cap(b.data) <= keptCap {
			b.data = b.data[:0]
		} else {
			b.data = nil
		}
	}
	return n, n == 0 && b.closed
}

func (b *buffer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
}

// end is one end of a pipe: it reads in and writes out.
type end struct {
	in, out *buffer

	mu       sync.Mutex
	deadline time.Time     // for reads; zero: none
	closed   bool          // this end closed
	waiting  int           // the Reads under way, which wait on wake among others
	wake     chan struct{} // signalled when the deadline changes while a Read waits, or this end closes
}

func newEnd(in, out *buffer) *end { return &end{in: in, out: out, wake: make(chan struct{}, 1)} }

func (e *end) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Read reads what the other end wrote, waiting for it until the read deadline.
func (e *end) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	defer e.doneReading()
	for first := true; ; first = false {
		e.mu.Lock()
		closed, dl := e.closed, e.deadline
		if first {
			e.waiting++ // from here, a new deadline wakes the Read
		}
		e.mu.Unlock()
		if closed {
			return 0, net.ErrClosed
		}
		healed := e.in.link.cut() // non-nil while the link is cut: nothing arrives
		if healed == nil {
			if n, eof := e.in.read(p); n > 0 {
				return n, nil
			} else if eof {
				return 0, io.EOF
			}
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
		case <-healed:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// doneReading records the end of a Read.
func (e *end) doneReading() {
	e.mu.Lock()
	e.waiting--
	e.mu.Unlock()
}

// Write appends p to the other end's input; it never blocks.
func (e *end) Write(p []byte) (int, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	return e.out.write(p)
}

// Close closes both directions.
func (e *end) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.out.close()
	e.in.close()
	e.poke()
	return nil
}

// SetReadDeadline sets the time after which a waiting Read fails with
// os.ErrDeadlineExceeded; the zero time means none.
func (e *end) SetReadDeadline(t time.Time) error {
	e.mu.Lock()
	changed := !t.Equal(e.deadline)
	e.deadline = t
	waiting := e.waiting > 0
	e.mu.Unlock()
	if changed && waiting { // a driver sets deadlines before each command, mostly with no Read waiting
		e.poke()
	}
	return nil
}

// SetDeadline sets the read deadline (writes never wait).
func (e *end) SetDeadline(t time.Time) error { return e.SetReadDeadline(t) }

// SetWriteDeadline does nothing: writes never wait.
func (e *end) SetWriteDeadline(time.Time) error { return nil }

// LocalAddr returns the pipe's address.
func (e *end) LocalAddr() net.Addr { return pipeAddr{} }

// RemoteAddr returns the pipe's address.
func (e *end) RemoteAddr() net.Addr { return pipeAddr{} }

// pipeAddr is the address of both ends of a pipe.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
