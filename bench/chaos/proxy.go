package main

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a fault-injecting TCP proxy on 127.0.0.1 in front of one server, for one
// worker: every connection accepted is piped to the server, and the faults apply to all
// of them:
//   - a one-way delay per direction (up: client to server, down: server to client), which
//     holds each chunk until its read time plus the delay, in order;
//   - a blackhole, which stalls both directions (bytes are held, as TCP holds unacknowledged
//     segments, and delivered in order once it heals), so no request or reply is lost or
//     reordered, and the client sees only silence;
//   - a reset, which closes every connection with RST (SO_LINGER 0) on both sides.
type proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	up, down  time.Duration
	blackhole bool
	healed    chan struct{} // closed when the blackhole is lifted
	links     map[*link]struct{}
	closed    bool

	// lateAfter: a request (client-to-server chunk) delivered this long after it was read
	// counts as late; orphans are late requests whose client had closed the connection by
	// then (it gave up on them), which the server still runs once the fault heals.
	lateAfter     time.Duration
	late, orphans atomic.Int64
}

// newProxy listens on a free loopback port and forwards to target; requests delivered
// lateAfter or more after they were read are counted (see proxy.late).
func newProxy(target string, lateAfter time.Duration) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, links: map[*link]struct{}{}, healed: make(chan struct{}), lateAfter: lateAfter}
	close(p.healed)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil { // the server is down: the client sees the connection close
			resetConn(c)
			continue
		}
		l := &link{p: p, client: c, server: s, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close(true)
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		go l.pump(c, s, true)
		go l.pump(s, c, false)
	}
}

// setDelay sets the one-way delays for chunks read from now on.
func (p *proxy) setDelay(up, down time.Duration) {
	p.mu.Lock()
	p.up, p.down = up, down
	p.mu.Unlock()
}

// setBlackhole stalls (on) or resumes (off) every connection.
func (p *proxy) setBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.blackhole {
		return
	}
	p.blackhole = on
	if on {
		p.healed = make(chan struct{})
	} else {
		close(p.healed)
	}
}

// heal lifts every fault.
func (p *proxy) heal() {
	p.setDelay(0, 0)
	p.setBlackhole(false)
}

// reset closes every current connection with RST on both sides and returns how many.
func (p *proxy) reset() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close(true)
	}
	return len(links)
}

// close stops accepting and resets every connection.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.reset()
	p.heal()
}

// state returns the delay for a direction and, if blackholed, the channel that closes
// when it heals (nil otherwise).
func (p *proxy) state(up bool) (time.Duration, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.down
	if up {
		d = p.up
	}
	if p.blackhole {
		return d, p.healed
	}
	return d, nil
}

// link is one client connection and its connection to the server.
type link struct {
	p              *proxy
	client, server net.Conn
	once           sync.Once
	done           chan struct{}
	clientGone     atomic.Bool // the client closed its side (or it failed)
}

// chunk is bytes read from one side, due for the other side at due.
type chunk struct {
	b         []byte
	read, due time.Time
}

// maxChunks bounds the bytes a direction holds (stalled or delayed) to maxChunks reads:
// then reading stops, and the sender's TCP buffers fill, as on a real stalled path.
const maxChunks = 256

// pump copies src to dst, one chunk per read, each delayed and stalled as the proxy says.
// Either side's error or close ends the link. A chunk read while its direction has no
// delay and no blackhole, and nothing read before it is still held, is written at once by
// the reading goroutine: a fault-free proxy should cost what a loopback hop costs, not two
// goroutine wake-ups per chunk on the machine that also runs the clients and the servers.
func (l *link) pump(src, dst net.Conn, up bool) {
	ch := make(chan chunk, maxChunks)
	var held atomic.Int32 // chunks sent on ch and not yet written: only the reader adds
	go func() {
		defer close(ch)
		buf := make([]byte, 16<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				d, stalled := l.p.state(up)
				now := time.Now()
				if d == 0 && stalled == nil && held.Load() == 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						l.close(false)
						return
					}
				} else {
					held.Add(1)
					select {
					case ch <- chunk{append([]byte(nil), buf[:n]...), now, now.Add(d)}:
					case <-l.done:
						return
					}
				}
			}
			if err != nil {
				if up {
					l.clientGone.Store(true)
				}
				return
			}
		}
	}()
	defer l.close(false)
	for c := range ch {
		for {
			if w := time.Until(c.due); w > 0 {
				t := time.NewTimer(w)
				select {
				case <-t.C:
				case <-l.done:
					t.Stop()
					return
				}
			}
			_, healed := l.p.state(up)
			if healed == nil {
				break
			}
			select {
			case <-healed:
			case <-l.done:
				return
			}
		}
		if up && time.Since(c.read) >= l.p.lateAfter {
			l.p.late.Add(1)
			if l.clientGone.Load() {
				l.p.orphans.Add(1)
			}
		}
		_, err := dst.Write(c.b)
		held.Add(-1)
		if err != nil {
			return
		}
	}
}

// close closes both connections, with RST if reset, once.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		close(l.done)
		if reset {
			resetConn(l.client)
			resetConn(l.server)
		} else {
			l.client.Close()
			l.server.Close()
		}
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// resetConn closes c with RST instead of FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
