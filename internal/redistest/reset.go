package redistest

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"
)

// ResetOnce starts a TCP proxy on 127.0.0.1:0 in front of target that resets (RST, on
// both sides) the connection of the first request whose bytes contain word (ASCII, any
// case), without passing that request on, as a network that drops a connection under a
// call would. Every other request and reply passes at once. It returns the proxy's address
// and a function that reports whether it has reset a connection. t.Cleanup closes the
// listener and every connection, and waits for the proxy's goroutines to exit.
func ResetOnce(t testing.TB, target, word string) (string, func() bool) {
	t.Helper()
	p := &resetProxy{word: bytes.ToLower([]byte(word))}
	addr := proxy(t, &p.conns, target, p.requests, func(c, s net.Conn) { pass(c, s) })
	return addr, p.done.Load
}

// resetProxy is the state behind ResetOnce.
type resetProxy struct {
	word []byte
	done atomic.Bool // the reset was made
	conns
}

// requests passes c's requests on to s, but resets both at the first one with the word.
func (p *resetProxy) requests(c, s net.Conn) {
	defer s.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(bytes.ToLower(buf[:n]), p.word) && p.done.CompareAndSwap(false, true) {
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
