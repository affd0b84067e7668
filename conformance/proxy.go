package conformance

import (
	"net"
	"sync"
	"testing"
)

// proxy is a TCP proxy on 127.0.0.1 in front of one server. It forwards bytes both ways
// until freeze; from then on it accepts connections and reads what clients send, but
// forwards nothing either way and never closes a connection: the node sees a server that
// accepts and never replies, whether its connection was open before or is dialled after.
// cut closes every connection open through it, as a server that drops its clients would.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	frozen bool
	closed bool
	conns  map[net.Conn]struct{}
}

// startProxy starts a proxy to target; t.Cleanup closes it and waits for its goroutines.
func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("conformance: proxy listener: %v", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// addr returns the address nodes dial instead of the server's.
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		var server net.Conn
		if !p.isFrozen() {
			server, _ = net.Dial("tcp", p.target) // on failure the client gets a silent peer
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.pipe(client, server) }()
		if server != nil {
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.pipe(server, client) }()
		}
	}
}

// pipe copies src to dst until src fails; while frozen it reads and drops. dst may be nil.
func (p *proxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !p.isFrozen() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if dst != nil && !p.isFrozen() {
				dst.Close() // pass the close on, as the real peer would
			}
			return
		}
	}
}

// track records the connections for cut and close; it reports false (after closing them)
// once the proxy is closed.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if c == nil {
			continue
		}
		if p.closed {
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
	}
	return !p.closed
}

func (p *proxy) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

// freeze stops all forwarding, for good.
func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// cut closes every connection open through the proxy; new ones are still accepted.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// close stops the listener, closes every connection and waits for the goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	p.wg.Wait()
}
