package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy starts a TCP proxy on 127.0.0.1:0 in front of target, for Slow and ResetOnce: for
// each connection it accepts it dials target, and runs up (client to server) and down
// (server to client) on goroutines of their own, each closing its destination when done.
// A goroutine that either starts must be counted in c.wg. It returns the proxy's address.
// t.Cleanup closes the listener and every connection, and waits for the goroutines.
func proxy(t testing.TB, c *conns, target string, up, down func(client, server net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return // closed
			}
			server, err := net.DialTimeout("tcp", target, time.Second)
			if err != nil {
				client.Close()
				continue
			}
			if !c.track(client, server) {
				return
			}
			c.wg.Add(2)
			go func() { defer c.wg.Done(); up(client, server) }()
			go func() { defer c.wg.Done(); down(client, server) }()
		}
	}()
	t.Cleanup(func() { c.close(ln) })
	return ln.Addr().String()
}

// pass copies src to dst as it comes, then closes dst.
func pass(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
}

// conns tracks a proxy's connections, so that its cleanup can close them all and wait for
// its goroutines, which it counts in wg.
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
