package conformance

import (
	"bytes"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// proxy is a TCP proxy on 127.0.0.1 in front of one server. It forwards bytes both ways
// until freeze; from then on it accepts connections and reads what clients send, but
// forwards nothing either way and never closes a connection: the node sees a server that
// accepts and never replies, whether its connection was open before or is dialled after.
// cut closes every connection open through it, as a server that drops its clients would;
// goDown does so and refuses new ones until goUp.
// hold holds back what the server sends until release, while clients' commands still reach
// it; holdFromSubscribe does the same from the first SUBSCRIBE or SSUBSCRIBE a client sends
// on (the replies to a new connection's handshake pass, the confirmation does not).
// subscribers counts the connections on which a client sent SUBSCRIBE or SSUBSCRIBE; watch
// tells when a client sent a given text.
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
	marks    []mark            // what watch waits for
	heldConn map[net.Conn]bool // client connections whose replies are held until release
	holdAll  bool              // held holds every connection's replies, not heldConn's only
	down     bool              // goDown: every connection is closed as soon as accepted
}

// mark is a byte string watch waits for clients to send, and the channel it closes then.
// hold: from then on, the server's replies on that client's connection are held.
type mark struct {
	text []byte
	seen chan struct{}
	hold bool
}

// startProxy starts a proxy to target; t.Cleanup closes it and waits for its goroutines.
func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("conformance: proxy listener: %v", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, subConns: map[net.Conn]bool{}, heldConn: map[net.Conn]bool{}}
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
		if p.isDown() {
			client.Close() // a server that is gone: the client's dial is answered by a close
			continue
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
	var tail []byte // the end of the previous read, for a text split across reads
	for {
		n, err := src.Read(buf)
		if n > 0 && client != nil {
			seen := append(tail, buf[:n]...)
			if bytes.Contains(bytes.ToUpper(seen[max(0, len(tail)-len("SSUBSCRIBE")):]), []byte("SUBSCRIBE")) {
				p.sawSubscribe(client)
			}
			p.sawMarks(client, seen)
			tail = append(tail[:0], seen[max(0, len(seen)-maxMark):]...)
		}
		if n > 0 && client == nil {
			p.waitRelease(dst)
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
	if p.armed {
		p.holdAll = true
		if p.held == nil {
			p.held = make(chan struct{})
		}
	}
	p.armed = false
}

// maxMark is the longest text watch may wait for: the end of a read the proxy keeps, to find
// a text split across two reads.
const maxMark = 128

// watch returns a channel that is closed once a client sends text (at most maxMark bytes)
// through the proxy, frozen or not.
func (p *proxy) watch(text string) <-chan struct{} { return p.addMark(text, false) }

// holdWhere is watch that also holds back, until release or close, what the server sends on
// the connection of the client that sent text, from before the server has it.
func (p *proxy) holdWhere(text string) <-chan struct{} { return p.addMark(text, true) }

func (p *proxy) addMark(text string, hold bool) <-chan struct{} {
	if len(text) > maxMark || len(text) < len("SSUBSCRIBE") {
		panic("conformance: proxy.watch of a text of " + strconv.Itoa(len(text)) + " bytes")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := mark{text: []byte(text), seen: make(chan struct{}), hold: hold}
	p.marks = append(p.marks, m)
	return m.seen
}

// sawMarks closes the channel of every watched text that seen, sent by client, holds. It
// runs before seen is forwarded.
func (p *proxy) sawMarks(client net.Conn, seen []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks = slices.DeleteFunc(p.marks, func(m mark) bool {
		if !bytes.Contains(seen, m.text) {
			return false
		}
		if m.hold {
			p.heldConn[client] = true
			if p.held == nil {
				p.held = make(chan struct{})
			}
		}
		close(m.seen)
		return true
	})
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
	p.holdAll = true
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
	p.holdAll = false
	clear(p.heldConn)
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// waitRelease waits while the proxy holds the server's replies to client: all of them
// (hold), or client's (holdWhere).
func (p *proxy) waitRelease(client net.Conn) {
	p.mu.Lock()
	held := p.held
	if p.holdsConns() && !p.heldConn[client] {
		held = nil
	}
	p.mu.Unlock()
	if held != nil {
		<-held
	}
}

// holdsConns reports whether the proxy holds the replies on some connections only
// (holdWhere) rather than on all (hold). p.mu is held.
func (p *proxy) holdsConns() bool { return len(p.heldConn) > 0 && !p.holdAll }

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

// goDown cuts every connection and closes each new one as soon as it is accepted, until
// goUp: a server that is gone for a while.
func (p *proxy) goDown() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.cut()
}

// goUp ends goDown: new connections are forwarded again.
func (p *proxy) goUp() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *proxy) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
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
