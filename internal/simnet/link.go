package simnet

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
)

// Link is a network path that a partition can cut: the data of every connection made over
// it (PipeVia, Server.DialVia) stops moving while it is cut, in both directions, as on a
// network that drops packets, and moves again when it heals, as TCP's resends deliver it
// then. A write while cut is accepted and held; a read waits, honouring its deadline; a
// dial waits for the heal or the end of its context. A Link starts whole. Its methods are
// safe for concurrent use.
type Link struct {
	mu     sync.Mutex
	healed chan struct{} // non-nil while cut: closed by Heal
}

// NewLink returns a whole Link.
func NewLink() *Link { return &Link{} }

// Cut cuts the link. Cutting a cut link does nothing.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.healed == nil {
		l.healed = make(chan struct{})
	}
}

// Heal ends a cut: the data held back moves on, in order. Healing a whole link does nothing.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.healed != nil {
		close(l.healed)
		l.healed = nil
	}
}

// IsCut reports whether the link is cut.
func (l *Link) IsCut() bool { return l.cut() != nil }

// cut returns a channel that closes when the cut heals, or nil if l is nil or whole.
func (l *Link) cut() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healed
}

// PipeVia returns the two ends of a Pipe whose data crosses l: while l is cut, what either
// end writes is held, and reads wait (until their deadline), as on a partitioned network.
// Closing an end while cut reaches the other end after the heal, behind the data held.
func PipeVia(l *Link) (net.Conn, net.Conn) {
	a, b := newBuffer(), newBuffer()
	a.link, b.link = l, l
	return newEnd(a, b), newEnd(b, a)
}

// DialVia returns a new connection to the server over a PipeVia(l). While l is cut it waits
// for the heal, and fails when ctx ends first, as a dial across a partition times out: with
// an error whose Timeout method reports true (ctx's deadline passed) or one that matches
// ctx's error (ctx was cancelled). Once connected it fails as Dial does while the server is
// down.
func (s *Server) DialVia(ctx context.Context, l *Link) (net.Conn, error) {
	if healed := l.cut(); healed != nil {
		select {
		case <-healed:
		case <-ctx.Done():
			err := ctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				err = os.ErrDeadlineExceeded
			}
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
		}
	}
	return s.dial(l)
}
