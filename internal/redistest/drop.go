package redistest

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"
)

// DropReplyOnce starts a TCP proxy on 127.0.0.1:0 in front of target that passes the first
// request whose bytes contain word (ASCII, any case) on to the server, and then closes the
// client's connection (a plain close: the client reads EOF) without passing the reply on,
// as a server that ran a command and went away before answering would. Every other request
// and reply passes at once. It returns the proxy's address and a function that reports
// whether it has dropped a reply. t.Cleanup closes the listener and every connection, and
// waits for the proxy's goroutines to exit.
func DropReplyOnce(t testing.TB, target, word string) (string, func() bool) {
	t.Helper()
	p := &dropProxy{word: bytes.ToLower([]byte(word))}
	addr := proxy(t, &p.conns, target, p.requests, p.replies)
	return addr, p.done.Load
}

// dropProxy is the state behind DropReplyOnce.
type dropProxy struct {
	word   []byte
	done   atomic.Bool              // the request was seen
	victim atomic.Pointer[net.Conn] // its client connection, whose next reply is dropped
	conns
}

// requests passes c's requests on to s, noting the connection of the first one with the
// word before it passes it on.
func (p *dropProxy) requests(c, s net.Conn) {
	defer s.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(bytes.ToLower(buf[:n]), p.word) && p.done.CompareAndSwap(false, true) {
				p.victim.Store(&c)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// replies passes s's replies on to c, but for the victim's next one, which it drops before
// closing c: the server ran the request, and the client reads EOF.
func (p *dropProxy) replies(c, s net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if v := p.victim.Load(); v != nil && *v == c {
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// DropRequests starts a TCP proxy on 127.0.0.1:0 in front of target that, for each of the
// first n requests whose bytes contain word (ASCII, any case), closes the client's
// connection without passing the request on, as a connection broken on the way would: the
// server never sees it. Every other request and reply passes at once. t.Cleanup closes the
// listener and every connection, and waits for the proxy's goroutines.
func DropRequests(t testing.TB, target, word string, n int) *RequestDropper {
	t.Helper()
	p := &RequestDropper{word: bytes.ToLower([]byte(word))}
	p.n.Store(int64(n))
	p.addr = proxy(t, &p.conns, target, p.requests, func(c, s net.Conn) { pass(c, s) })
	return p
}

// RequestDropper is a proxy that DropRequests started.
type RequestDropper struct {
	addr    string
	word    []byte
	n       atomic.Int64 // how many requests with the word to drop
	dropped atomic.Int64
	conns
}

// Addr returns the proxy's address.
func (p *RequestDropper) Addr() string { return p.addr }

// Dropped returns how many requests the proxy has dropped.
func (p *RequestDropper) Dropped() int { return int(p.dropped.Load()) }

// Stop makes the proxy pass every request from now on.
func (p *RequestDropper) Stop() { p.n.Store(0) }

// requests passes c's requests on to s, but for one with the word while fewer than n were
// dropped: it closes both connections instead, the request's bytes read before the word
// having reached the server, which drops the incomplete request as the connection closes.
// A word split between two reads is found too.
func (p *RequestDropper) requests(c, s net.Conn) {
	defer s.Close()
	defer c.Close()
	buf := make([]byte, 32<<10)
	seen := make([]byte, 0, len(p.word)+len(buf)) // the end of the last read, then this one
	for {
		n, err := c.Read(buf)
		if n > 0 {
			seen = append(seen[:0], seen[max(0, len(seen)-len(p.word)+1):]...)
			seen = append(seen, bytes.ToLower(buf[:n])...)
			if bytes.Contains(seen, p.word) && p.drop() {
				return
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// drop counts one more dropped request, unless n have been.
func (p *RequestDropper) drop() bool {
	for {
		d := p.dropped.Load()
		if d >= p.n.Load() {
			return false
		}
		if p.dropped.CompareAndSwap(d, d+1) {
			return true
		}
	}
}
