package simnet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/go-redlock/redlock/internal/simlua"
)

// DefaultUptime is how long a new Server reports it has been up: long enough that no
// restart guard waits for it, as for a server that was running before the test began.
const DefaultUptime = time.Hour

// Server is one Redis server in a synctest bubble: a miniredis whose keys expire on the
// bubble's clock (plus an offset, see SetClockOffset), which answers INFO server with
// uptime_in_seconds and run_id as redis-server does, and which can crash and restart.
// Its methods are safe for concurrent use.
type Server struct {
	addr string

	mu      sync.Mutex
	m       *miniredis.Miniredis // nil while down
	started time.Time            // the bubble's time when the process started
	runID   string
	boots   int                          // the processes started so far
	offset  time.Duration                // the server's clock minus the bubble's
	pinned  bool                         // the clock was offset once: miniredis's time is set before each command
	noInfo  atomic.Bool                  // INFO is miniredis's own (see SetInfo); atomic: read under miniredis's lock
	skew    atomic.Int64                 // offset in ns, read under miniredis's lock (by LASTSAVE)
	pooled  atomic.Bool                  // scripts run on the pooled engine (see SetPooledScripts)
	strict  atomic.Bool                  // scripts' keys are checked against their KEYS (see SetStrictKeys)
	writers atomic.Pointer[writerRecord] // the writer record (see RecordWriters); nil: none kept
	hung    chan struct{}                // non-nil while hung (see Hang): closed when that ends
	here    map[*clientConn]struct{}     // the running process's connections served in the writer (see clientConn)
	ended   chan struct{}                // closed when the running process ends (see keepStack)
}

// NewServer starts a server at addr, which must be an IP address and port
// ("10.0.0.1:6379", say): go-redis resolves a host name outside the bubble. The server
// reports an uptime of DefaultUptime; it crashes (Crash) when t's test ends. NewServer must
// be called inside the bubble.
func NewServer(t testing.TB, addr string) *Server {
	t.Helper()
	s, err := Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Crash)
	return s
}

// Start starts a server at addr, as NewServer does, for a caller that has no testing.TB:
// the caller stops it with Crash. Its error says that addr is not an IP address and port.
func Start(addr string) (*Server, error) {
	if host, _, err := net.SplitHostPort(addr); err != nil || net.ParseIP(host) == nil {
		return nil, fmt.Errorf("simnet: address %q is not an IP address and port", addr)
	}
	s := &Server{addr: addr}
	s.boot(DefaultUptime)
	return s, nil
}

// NewServers starts n servers, at 10.0.0.1:6379, 10.0.0.2:6379 and so on (see NewServer).
func NewServers(t testing.TB, n int) []*Server {
	t.Helper()
	out := make([]*Server, n)
	for i := range out {
		out[i] = NewServer(t, fmt.Sprintf("10.0.0.%d:6379", i+1))
	}
	return out
}

// boot starts a new, empty process that reports it has been up for up. Called with s.mu
// held, or before s is shared.
func (s *Server) boot(up time.Duration) {
	s.boots++
	m := miniredis.NewMiniRedis()
	if s.pinned {
		m.SetTime(time.Now().Add(s.offset))
	}
	m.ClockTTL(true)
	sum := sha1.Sum(fmt.Appendf(nil, "%s#%d", s.addr, s.boots))
	s.m, s.started, s.runID = m, time.Now().Add(-up), hex.EncodeToString(sum[:])
	if c, err := m.Dial(); err == nil { // the first Dial makes the server that m.Server returns
		_ = c.Close()
	}
	s.ended = make(chan struct{})
	go keepStack(keptStack, s.ended)
	info := &infoReply{runID: s.runID, started: s.started}
	eng, err := simlua.New(m, simlua.Options{
		Checks: s.checks,
		Info: func() (string, bool) {
			if !s.info() {
				return "", false
			}
			return info.get().text, true
		},
		// As redis-server: the process counts as saved when it started, by its own clock
		// (it never saves). Where INFO is miniredis's, so is LASTSAVE: there is none.
		LastSave: func() (int64, bool) {
			if !s.info() {
				return 0, false
			}
			return info.started.Add(time.Duration(s.skew.Load())).Unix(), true
		},
	})
	if err != nil {
		eng = nil // every script is miniredis's (see scripted)
	}
	m.Server().SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if cmd != "INFO" || !s.info() {
			return s.scripted(eng, p, cmd, args)
		}
		p.WriteBulk(info.get().text)
		return true
	})
}

// scripted runs a script's command (EVAL, EVALSHA) for the peer p on eng, the pooled
// engine, if the server's scripts run there, and reports whether it did, or refused it.
// While scripts are checked (SetStrictKeys, RecordWriters), it refuses the calls that
// miniredis would run unchecked: EVAL_RO and EVALSHA_RO (eng refuses them), and every
// script if the process has no engine.
func (s *Server) scripted(eng *simlua.Engine, p *server.Peer, cmd string, args []string) bool {
	checked := s.checks().On()
	switch {
	case eng == nil && checked && (cmd == "EVAL" || cmd == "EVALSHA" || cmd == "EVAL_RO" || cmd == "EVALSHA_RO"):
		p.WriteError("ERR simnet: " + cmd + " cannot run while scripts are checked: the process has no script engine")
		return true
	case eng == nil, !checked && !s.pooled.Load():
		return false
	}
	return eng.Hook(p, cmd, args)
}

// checks returns the checks that the server's scripts are under: of their keys
// (SetStrictKeys), and of their writes (RecordWriters).
func (s *Server) checks() simlua.Checks {
	c := simlua.Checks{StrictKeys: s.strict.Load()}
	if w := s.writers.Load(); w != nil {
		c.Writes = w.rec
	}
	return c
}

// infoReply is a process's reply to INFO, as redis-server's server section: every section
// reads as that one (the scripts ask for "server"). It is made again only when the uptime,
// in whole seconds, has changed: the restart guard's scripts read it at each attempt.
type infoReply struct {
	runID   string
	started time.Time // the bubble's time when the process started
	last    atomic.Pointer[infoText]
}

// infoText is the text of an INFO reply at one uptime.
type infoText struct {
	up   int64
	text string
}

// get returns the reply at the current uptime.
func (r *infoReply) get() *infoText {
	up := int64(time.Since(r.started) / time.Second)
	if t := r.last.Load(); t != nil && t.up == up {
		return t
	}
	text := "# Server\r\nredis_version:7.4.0\r\nrun_id:" + r.runID + "\r\nuptime_in_seconds:" + strconv.FormatInt(up, 10) + "\r\n"
	t := &infoText{up: up, text: text}
	r.last.Store(t)
	return t
}

// info reports whether the server answers INFO as redis-server does. It takes no lock: a
// script's INFO asks it under miniredis's lock, which sync takes under s.mu.
func (s *Server) info() bool { return !s.noInfo.Load() }

// SetInfo sets whether the server answers INFO as redis-server does (true, the default),
// or as miniredis does, which refuses the server section: then the scripts find neither
// uptime nor run_id, as on a server that cannot report them.
func (s *Server) SetInfo(on bool) { s.noInfo.Store(!on) }

// SetPooledScripts sets whether the server runs EVAL and EVALSHA on a script engine that
// keeps its Lua states in a pool (true), or as miniredis does (false, the default), making
// a Lua state for each call, which costs far more. The scripts behave the same either
// way (see package simlua); the setting holds across restarts.
func (s *Server) SetPooledScripts(on bool) { s.pooled.Store(on) }

// Addr returns the server's address, for go-redis's Options.Addr (see Dial).
func (s *Server) Addr() string { return s.addr }

// String returns the server's address.
func (s *Server) String() string { return s.addr }

// Dial returns a new connection to the server over a Pipe, or, while the server is down, an
// error that matches syscall.ECONNREFUSED, as dialling a stopped redis-server does. Its
// signature is go-redis's Options.Dialer; the network and address are ignored. The
// connection serves its commands in the goroutine that writes them while it can (see
// clientConn), and through the server's goroutines otherwise.
func (s *Server) Dial(context.Context, string, string) (net.Conn, error) { return s.dial(nil) }

// dial is Dial over a PipeVia(l) (l nil: a Pipe).
func (s *Server) dial(l *Link) (net.Conn, error) {
	// Under s.mu, so that a Crash either comes after, and closes the connection, or
	// before, and the dial is refused (and m.Server is not read while m.Close runs).
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	client, srv := PipeVia(l)
	c := newClientConn(s, s.m.Server(), client, &serverEnd{Conn: srv, s: s, closed: make(chan struct{})}, l)
	if s.here == nil {
		s.here = map[*clientConn]struct{}{}
	}
	s.here[c] = struct{}{}
	return c, nil
}

// Do runs one command on the running process directly, as a connection's would run, but
// past the connections (so also while the server is hung or a link cut), and returns its
// reply as miniredis's server.ParseReply reads it: an error reply as the error. While the
// server is down it returns an error that matches syscall.ECONNREFUSED.
func (s *Server) Do(args ...string) (any, error) {
	s.mu.Lock()
	var srv *server.Server
	if s.m != nil {
		srv = s.m.Server()
	}
	s.mu.Unlock()
	if srv == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	if s.pinnedClock() {
		s.sync()
	}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	srv.Dispatch(server.NewPeer(w), args) // outside s.mu: INFO reads it
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return server.ParseReply(bufio.NewReader(&out))
}

// pinnedClock reports whether the clock is offset (see SetClockOffset).
func (s *Server) pinnedClock() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pinned
}

// serverEnd is the server's end of a connection: it holds each request back while the
// server is hung, and sets the server's clock before the request is served, if the clock
// is offset.
type serverEnd struct {
	net.Conn
	s      *Server
	once   sync.Once
	closed chan struct{} // closed by Close
}

func (c *serverEnd) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		for {
			c.s.mu.Lock()
			hung := c.s.hung
			c.s.mu.Unlock()
			if hung == nil {
				break
			}
			select {
			case <-hung:
			case <-c.closed:
				return 0, net.ErrClosed
			}
		}
		c.s.sync()
	}
	return n, err
}

func (c *serverEnd) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// Hang makes the server stop answering, as a process stopped with SIGSTOP whose kernel
// still accepts connections: dials succeed, and requests, on connections old and new, are
// read and held back, unanswered, until Resume (or a Crash, which closes the connections).
// Hanging a hung server does nothing.
func (s *Server) Hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hung == nil {
		s.hung = make(chan struct{})
	}
}

// Resume ends a Hang: the requests held back are served, in order.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hung != nil {
		close(s.hung)
		s.hung = nil
	}
}

// sync sets an offset clock's time on the running process and returns the process, or nil
// if the server is down.
func (s *Server) sync() *miniredis.Miniredis {
	s.mu.Lock()
	m, pinned, offset := s.m, s.pinned, s.offset
	s.mu.Unlock()
	// Outside s.mu: SetTime waits for a running script, and a script's INFO takes s.mu.
	if m != nil && pinned {
		m.SetTime(time.Now().Add(offset))
	}
	return m
}

// Miniredis returns the running process, to inspect or change its data, or nil while the
// server is down. A crash and restart replace it: call Miniredis again after a Restart. With
// the clock offset (SetClockOffset), the process's time is set as Miniredis returns it and
// before each command a client sends, and does not move in between.
func (s *Server) Miniredis() *miniredis.Miniredis { return s.sync() }

// SetClockOffset sets the server's clock to the bubble's plus d (negative: behind), so that
// keys expire by a clock that disagrees with the clients'. The offset holds across restarts.
func (s *Server) SetClockOffset(d time.Duration) {
	s.mu.Lock()
	s.offset, s.pinned = d, true
	s.skew.Store(int64(d))
	s.mu.Unlock()
	s.sync()
}

// RunID returns the run_id the running process reports (40 hex digits, a new one for each
// process), or "" while the server is down.
func (s *Server) RunID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return ""
	}
	return s.runID
}

// Uptime returns the uptime the running process reports, in whole seconds as
// uptime_in_seconds does, or 0 while the server is down.
func (s *Server) Uptime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return 0
	}
	return time.Since(s.started).Truncate(time.Second)
}

// Up reports whether the server is running.
func (s *Server) Up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m != nil
}

// Crash stops the server as a killed process stops: its connections close, its data is
// lost, and dials are refused until Restart. Crashing a server that is down does nothing.
func (s *Server) Crash() {
	s.mu.Lock()
	m, here := s.m, s.here
	s.m, s.here = nil, nil
	if s.ended != nil {
		close(s.ended)
		s.ended = nil
	}
	s.mu.Unlock()
	for c := range here {
		_ = c.end.Close()
	}
	if m != nil {
		m.Close()
	}
}

// Restart starts a crashed server again, empty, with uptime 0 and a new run_id. Restarting
// a server that is up does nothing.
func (s *Server) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.boot(0)
	}
}
