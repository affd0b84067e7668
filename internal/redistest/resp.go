package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// doDefaultTimeout bounds one Do call: dial, write and read.
const doDefaultTimeout = 5 * time.Second

// Do sends one command over a fresh TCP connection using RESP and returns
// the reply as a Go value: simple string -> string, integer -> int64, bulk
// string -> string (nil bulk -> nil), array -> []any (nil array -> nil).
// An error reply is returned as the error result, carrying the server's
// message (e.g. "ERR unknown command ..."); inside an array it is stored as
// an error element. The whole call times out after 5 s.
func (s *Server) Do(args ...string) (any, error) {
	return DoTimeout(s.Addr(), doDefaultTimeout, args...)
}

// doTimeout is Do with a caller-chosen timeout.
func (s *Server) doTimeout(timeout time.Duration, args ...string) (any, error) {
	return DoTimeout(s.Addr(), timeout, args...)
}

// DoTimeout sends one command to the Redis server at addr, as Server.Do does, over a fresh
// connection, within timeout. It is for servers this package did not start (miniredis, say).
func DoTimeout(addr string, timeout time.Duration, args ...string) (any, error) {
	deadline := time.Now().Add(timeout)
	conn, err := (&net.Dialer{Deadline: deadline}).Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(EncodeCommand(args)); err != nil {
		return nil, err
	}
	reply, err := ReadReply(bufio.NewReader(conn))
	if err != nil {
		return nil, err
	}
	if replyErr, ok := reply.(error); ok {
		return nil, replyErr
	}
	return reply, nil
}

// EncodeCommand encodes args as a RESP array of bulk strings.
func EncodeCommand(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, arg := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(arg), arg)
	}
	return b
}

// ReadReply reads one RESP2 reply. Error replies are returned as values of
// type error; the error result is for I/O and protocol failures only.
func ReadReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("redistest: malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return errors.New(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2) // payload and CRLF
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		elems := make([]any, n)
		for i := range elems {
			if elems[i], err = ReadReply(r); err != nil {
				return nil, err
			}
		}
		return elems, nil
	default:
		return nil, fmt.Errorf("redistest: unknown reply type %q", kind)
	}
}
