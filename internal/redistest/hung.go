package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Hung starts a TCP listener on 127.0.0.1:0 that accepts connections and
// never replies: it reads and discards whatever is sent and keeps each
// connection open. It returns the listener address. t.Cleanup closes the
// listener and all accepted connections and waits for its goroutines to
// exit.
func Hung(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: hung listener: %v", err)
	}
	h := &hungListener{ln: ln}
	h.wg.Add(1)
	go h.serve()
	t.Cleanup(h.close)
	return ln.Addr().String()
}

// hungListener is the state behind Hung.
type hungListener struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

// serve accepts connections until the listener is closed.
func (h *hungListener) serve() {
	defer h.wg.Done()
	for {
		conn, err := h.ln.Accept()
		if err != nil {
			return
		}
		if !h.track(conn) {
			conn.Close()
			return
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			_, _ = io.Copy(io.Discard, conn)
		}()
	}
}

// track records conn for close and reports false if already closed.
func (h *hungListener) track(conn net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.conns = append(h.conns, conn)
	return true
}

// close stops the listener and connections and waits for the goroutines.
func (h *hungListener) close() {
	h.ln.Close()
	h.mu.Lock()
	h.closed = true
	for _, conn := range h.conns {
		conn.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
