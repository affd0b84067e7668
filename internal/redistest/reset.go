package redistest

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// ResetOnce starts a TCP proxy on 127.0.0.1:0 in front of target that resets (RST, on
// both sides) the connection of the first request whose bytes contain word (ASCII, any
// case), without passing that request on, as a network that drops a connection under a
// call would. Every other request and reply passes at once. It returns the proxy's address
// and a function that reports how many connections it reset. t.Cleanup closes the listener
// and every connection, and waits for the proxy's goroutines to exit.
func ResetOnce(t testing.TB, target, word string) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: reset proxy: %v", err)
	}
	p := &resetProxy{ln: ln, target: target, word: bytes.ToLower([]byte(word))}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { p.conns.close(ln) })
	return ln.Addr().String(), func() int { return int(p.resets.Load()) }
}

// resetProxy is the state behind ResetOnce.
type resetProxy struct {
	ln     net.Listener
	target string
	word   []byte
	done   atomic.Bool // the reset was made
	resets atomic.Int32
	conns
}

func (p *resetProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.requests(c, s)
		go func() { // replies, at once
			defer p.wg.Done()
			_, _ = io.Copy(c, s)
			c.Close()
		}()
	}
}

// requests passes c's requests on to s, but resets both at the first one with the word.
func (p *resetProxy) requests(c, s net.Conn) {
	defer p.wg.Done()
	defer s.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(bytes.ToLower(buf[:n]), p.word) && p.done.CompareAndSwap(false, true) {
				p.resets.Add(1)
				for _, conn := range []net.Conn{c, s} {
					if tc, ok := conn.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					conn.Close()
				}
				return
			}
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
