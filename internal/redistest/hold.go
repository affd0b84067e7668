package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Holder is a TCP proxy in front of a server that can hold back the server's replies for a
// while: the server runs each command as it comes, and the client waits for the reply, as
// with a slow server, on a connection that stays open. Make one with Holding.
type Holder struct {
	addr  string
	conns conns

	mu    sync.Mutex
	until time.Time // replies read before then wait until then
}

// Holding starts a Holder on 127.0.0.1:0 in front of target. t.Cleanup closes the listener
// and every connection, and waits for the proxy's goroutines to exit.
func Holding(t testing.TB, target string) *Holder {
	t.Helper()
	h := &Holder{}
	h.addr = proxy(t, &h.conns, target, func(c, s net.Conn) { pass(s, c) }, h.replies)
	return h
}

// Addr returns the address clients dial instead of the server's.
func (h *Holder) Addr() string { return h.addr }

// Hold holds back every reply the server sends from now on until d from now, on every
// connection, then passes them on in order.
func (h *Holder) Hold(d time.Duration) {
	h.mu.Lock()
	h.until = time.Now().Add(d)
	h.mu.Unlock()
}

// replies copies s to c, each chunk once the hold in force when it was read is over.
func (h *Holder) replies(c, s net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			h.mu.Lock()
			until := h.until
			h.mu.Unlock()
			time.Sleep(time.Until(until))
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
