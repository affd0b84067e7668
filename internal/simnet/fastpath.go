package simnet

import (
	"bufio"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/alicebob/miniredis/v2/server"
)

// clientConn is a client's end of a connection to a Server (see Server.Dial). It serves
// each command in the goroutine that writes it, while it can, rather than leaving it to the
// server's goroutines: the command's reply is then in the client's end before Write
// returns, and no goroutine waits on another. That saves two hand-offs between goroutines
// (the writer to miniredis's reader, the reader to its dispatcher) and the wake-up of the
// client's reader, for each command.
//
// It serves a command itself only if (see serveHere) the command is a whole RESP array
// within one Write, one of fastCommands (which neither block nor change the connection's
// state, so that the connection's state stays a new one's), the connection has been served
// this way from its start, the process it reached is still up and not hung, and its link is
// not cut. At the first command that fails one of these, the connection is handed over to
// miniredis's goroutines (ServeConn) for the rest of its life: they serve it from that
// command on, as a new connection, which is what holds requests back while the server is
// hung or the link cut, and what serves pub/sub, MULTI, blocking commands, AUTH and SELECT.
// A client sees the same either way, but for the time: a command served here was served
// before a fault (Hang, Cut, Crash) that begins while it is served.
type clientConn struct {
	net.Conn                // the client's end of the pipe
	s        *Server        // the server dialled
	srv      *server.Server // the process dialled's server
	end      *serverEnd     // the server's end of the pipe, for ServeConn
	link     *Link          // the link the pipe crosses (nil: none)
	peer     *server.Peer   // the connection's peer while served here, replying into end
	mu       sync.Mutex     // serialises Writes, and so the commands served here
	handed   bool           // handed over to miniredis's goroutines (guarded by mu)
	args     []string       // the command's arguments, reused from command to command (guarded by mu)
}

// newClientConn returns the client's end of a new connection over client and end, the
// ends of a pipe across l, to the process whose server is srv. It must be registered in
// s.here (under s.mu) before it is used.
func newClientConn(s *Server, srv *server.Server, client net.Conn, end *serverEnd, l *Link) *clientConn {
	return &clientConn{Conn: client, s: s, srv: srv, end: end, link: l, peer: server.NewPeer(bufio.NewWriter(end))}
}

// Write serves the whole commands at the start of p that it can serve itself, in order, and
// hands the rest, if any, and the connection over to the server's goroutines.
func (c *clientConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handed {
		return c.Conn.Write(p)
	}
	rest := p
	var text string // p as a string, made once: the commands' arguments are slices of it
	for len(rest) > 0 {
		n := commandLen(rest)
		if n == 0 {
			break
		}
		if text == "" {
			text = string(rest)
		}
		args := parseCommand(c.args[:0], text[:n])
		c.args = args
		if !fastCommand(args) || !c.s.serveHere(c) {
			clear(args)
			break
		}
		c.srv.Dispatch(c.peer, args) // which keeps no slice of args: none of fastCommands blocks
		c.peer.Flush()
		clear(args) // keep no argument past the command
		rest, text = rest[n:], text[n:]
	}
	if len(rest) > 0 {
		if _, err := c.s.handOver(c, rest); err != nil {
			return len(p) - len(rest), err
		}
	}
	return len(p), nil
}

// Close closes the connection.
func (c *clientConn) Close() error {
	c.s.forget(c)
	return c.Conn.Close()
}

// serveHere reports whether c's next command may be served in the writer: c has not been
// handed over, the server has not crashed since c was dialled (a Crash closes c), nor is it
// hung, and c's link is not cut. It sets an offset clock's time, as serverEnd.Read does
// before a command.
func (s *Server) serveHere(c *clientConn) bool {
	s.mu.Lock()
	_, ok := s.here[c]
	ok = ok && s.hung == nil
	pinned := s.pinned
	s.mu.Unlock()
	if !ok || c.link.IsCut() {
		return false
	}
	if pinned {
		s.sync()
	}
	return true
}

// handOver writes rest to c's server end and has c's process serve c from then on with
// its goroutines, as a connection that was never served in the writer. If c was closed (by
// its client or a Crash), it only writes, which fails. c.mu is held.
func (s *Server) handOver(c *clientConn, rest []byte) (int, error) {
	c.handed = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.here[c]; !ok {
		return c.Conn.Write(rest)
	}
	delete(s.here, c)
	n, err := c.Conn.Write(rest)
	if err == nil {
		c.srv.ServeConn(c.end)
	}
	return n, err
}

// forget drops c from the connections served in the writer, if it is one.
func (s *Server) forget(c *clientConn) {
	s.mu.Lock()
	delete(s.here, c)
	s.mu.Unlock()
}

// fastCommands are the commands that a connection may serve in the writer (see clientConn):
// none blocks, nor changes the connection's state (selected database, authentication,
// transaction, subscriptions, protocol). HELLO is one only as HELLO 2 (see fastCommand).
var fastCommands = map[string]bool{
	"EVAL": true, "EVALSHA": true, "EVAL_RO": true, "EVALSHA_RO": true, "SCRIPT": true,
	"PING": true, "ECHO": true, "TIME": true, "INFO": true, "HELLO": true,
	"GET": true, "SET": true, "DEL": true, "EXISTS": true, "INCR": true, "KEYS": true,
	"PTTL": true, "TTL": true, "PEXPIRE": true, "EXPIRE": true, "TYPE": true,
	"PUBLISH": true, "SPUBLISH": true,
}

// fastCommand reports whether the command args (its name first) may be served in the
// writer.
func fastCommand(args []string) bool {
	name := args[0]
	var up [16]byte
	if len(name) > len(up) {
		return false
	}
	for i := range len(name) {
		b := name[i]
		if b >= 'a' && b <= 'z' {
			b -= 'a' - 'A'
		}
		up[i] = b
	}
	if !fastCommands[string(up[:len(name)])] {
		return false
	}
	if string(up[:len(name)]) == "HELLO" {
		return len(args) == 2 && args[1] == "2"
	}
	return true
}

// commandLen returns the length of the command at the start of p, a RESP array of one bulk
// string or more, as clients send commands; 0 if p does not start with a whole one.
func commandLen(p []byte) int {
	n, i, ok := header(p, 0, '*')
	if !ok || n < 1 {
		return 0
	}
	for range n {
		var l int
		if l, i, ok = header(p, i, '$'); !ok || l < 0 || len(p)-i < l+2 {
			return 0
		}
		i += l
		if p[i] != '\r' || p[i+1] != '\n' {
			return 0
		}
		i += 2
	}
	return i
}

// header reads the line at p[i:], which must be kind and a decimal number ended by CRLF,
// and returns the number and where the next line starts.
func header(p []byte, i int, kind byte) (n, next int, ok bool) {
	if i >= len(p) || p[i] != kind {
		return 0, 0, false
	}
	j := i + 1
	for j < len(p) && p[j] != '\r' {
		j++
	}
	if j+1 >= len(p) || p[j+1] != '\n' || j-i-1 > 9 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(string(p[i+1 : j]))
	return n, j + 2, err == nil
}

// parseCommand returns the arguments of the command cmd, which commandLen found whole, in
// args (reused): slices of cmd.
func parseCommand(args []string, cmd string) []string {
	n, i := atoiLine(cmd, 1)
	args = slices.Grow(args[:0], n)[:n]
	for k := range args {
		var l int
		l, i = atoiLine(cmd, i+1)
		args[k] = cmd[i : i+l]
		i += l + 2
	}
	return args
}

// atoiLine returns the number from cmd[i:] to the next CRLF and where the next line starts;
// commandLen checked it.
func atoiLine(cmd string, i int) (n, next int) {
	j := i
	for cmd[j] != '\r' {
		j++
	}
	n, _ = strconv.Atoi(cmd[i:j])
	return n, j + 2
}
