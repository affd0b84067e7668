package conformance

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// proxy is a TCP proxy on 127.0.0.1 in front of one server. It forwards bytes both ways
// until freeze; from then on it accepts connections and reads what clients send, but
// forwards nothing either way and never closes a connection: the node sees a server that
// accepts and never replies, whether its connection was open before or is dialled after.
// cut closes every connection open through it, as a server that drops its clients would.
// hold holds back what the server sends until release, while clients' commands still reach
// it; holdFromSubscribe does the same from the first SUBSCRIBE or SSUBSCRIBE a client sends
// on (the replies to a new connection's handshake pass, the confirmation does not).
// subscribers counts the connections on which a client sent SUBSCRIBE or SSUBSCRIBE.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	frozen   bool
	held     chan struct{} // non-nil while replies are held; closed by release
	armed    bool          // hold at the next SUBSCRIBE or SSUBSCRIBE (holdFromSubscribe)
	closed   bool
	conns    map[net.Conn]struct{}
	subConns map[net.Conn]bool // client connections that sent a SUBSCRIBE or SSUBSCRIBE
}

// startProxy starts a proxy to target; t.Cleanup closes it and waits for its goroutines.
func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("conformance: proxy listener: %v", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, subConns: map[net.Conn]bool{}}
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
		go func() { defer p.wg.Done(); p.pipe(client, server, client) }()
		if server != nil {
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.pipe(server, client, nil) }()
		}
	}
}

// pipe copies src to dst until src fails; while frozen it reads and drops. dst may be nil.
// client is src when src is a client (its commands are watched for SUBSCRIBE), nil when src
// is the server (what it sends waits while held).
func (p *proxy) pipe(src, dst, client net.Conn) {
	buf := make([]byte, 32<<10)
	var tail []byte // the end of the previous read, for a command name split across reads
	for {
		n, err := src.Read(buf)
		if n > 0 && client != nil {
			seen := append(tail, buf[:n]...)
			if bytes.Contains(bytes.ToUpper(seen), []byte("SUBSCRIBE")) {
				p.sawSubscribe(client)
			}
			tail = append(tail[:0], seen[max(0, len(seen)-len("SSUBSCRIBE")):]...)
		}
		if n > 0 && client == nil {
			p.waitRelease()
		}
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

// sawSubscribe records that client sent a SUBSCRIBE or SSUBSCRIBE (or an UNSUBSCRIBE: a
// pub/sub connection either way), and holds the server's replies if holdFromSubscribe
// armed it. It runs before the command is forwarded: the server's reply to it is held.
func (p *proxy) sawSubscribe(client net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subConns[client] = true
	if p.armed && p.held == nil {
		p.held = make(chan struct{})
	}
	p.armed = false
}

// subscribers returns how many connections through the proxy have sent a SUBSCRIBE or
// SSUBSCRIBE since it started.
func (p *proxy) subscribers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.subConns)
}

// hold holds back everything the server sends, until release or close.
func (p *proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// holdFromSubscribe makes the proxy hold back everything the server sends, until release
// or close, from the moment a client sends its next SUBSCRIBE or SSUBSCRIBE.
func (p *proxy) holdFromSubscribe() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// release passes on what hold held back, and everything after it.
func (p *proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// waitRelease waits while the proxy holds the server's replies.
func (p *proxy) waitRelease() {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		<-held
	}
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
	p.release()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	p.wg.Wait()
}
