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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: slow proxy: %v", err)
	}
	p := &slowProxy{ln: ln, target: target, delay: delay}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { p.conns.close(ln) })
	return ln.Addr().String()
}

// slowProxy is the state behind Slow.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	conns
}

// serve accepts connections until the listener is closed, and pipes each to the target.
func (p *slowProxy) serve() {
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
		go func() { // requests, at once
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, err := s.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			s.Close()
		}()
		go p.replies(s, c)
	}
}

// chunk is a reply read from the server, due at the client at due.
type chunk struct {
	data []byte
	due  time.Time
}

// replies reads from s and writes each chunk to c delay after it was read, in order.
func (p *slowProxy) replies(s, c net.Conn) {
	defer p.wg.Done()
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
