package redistest

import (
	"net"
	"sync"
)

// conns tracks a test proxy's connections (see Slow and ResetOnce), so that its cleanup can
// close them all and wait for the proxy's goroutines, which it counts in wg.
type conns struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	list   []net.Conn
}

// track records cs for close, or closes them and reports false if close came first.
func (t *conns) track(cs ...net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	t.list = append(t.list, cs...)
	return true
}

// close closes ln and every connection tracked, and waits for the goroutines in wg.
func (t *conns) close(ln net.Listener) {
	t.mu.Lock()
	t.closed = true
	list := t.list
	t.mu.Unlock()
	ln.Close()
	for _, c := range list {
		c.Close()
	}
	t.wg.Wait()
}
