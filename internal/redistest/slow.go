package redistest

import (
	"net"
	"testing"
	"time"
)

// Slow starts a TCP proxy on 127.0.0.1:0 in front of target that delays every reply (each
// chunk from the server to the client) by delay, in order, as a server that far away
// would: each round trip costs delay more. Requests pass at once. It returns the proxy's
// address. t.Cleanup closes the listener and every connection, and waits for the proxy's
// goroutines to exit.
func Slow(t testing.TB, target string, delay time.Duration) string {
	t.Helper()
	p := &slowProxy{delay: delay}
	return proxy(t, &p.conns, target, func(c, s net.Conn) { pass(s, c) }, p.replies)
}

// slowProxy is the state behind Slow.
type slowProxy struct {
	delay time.Duration
	conns
}

// chunk is a reply read from the server, due at the client at due.
type chunk struct {
	data []byte
	due  time.Time
}

// replies reads from s and writes each chunk to c delay after it was read, in order.
func (p *slowProxy) replies(c, s net.Conn) {
	queue := make(chan chunk, 1024)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer c.Close()
		for ch := range queue {
			time.Sleep(time.Until(ch.due))
			if _, err := c.Write(ch.data); err != nil {
				for range queue { // drain, so that the reader never blocks
				}
				return
			}
		}
	}()
	defer close(queue)
	for {
		buf := make([]byte, 32<<10)
		n, err := s.Read(buf)
		if n > 0 {
			queue <- chunk{data: buf[:n], due: time.Now().Add(p.delay)}
		}
		if err != nil {
			return
		}
	}
}
