package conformance

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// The suite prepares and inspects the server through its own tiny RESP2 client, never through
// the Node under test, so that a faulty backend cannot hide its own faults.

// adminTimeout bounds one admin command: dial, write and read.
const adminTimeout = 5 * time.Second

// serverError is an error reply from the server, such as "WRONGTYPE ...".
type serverError string

func (e serverError) Error() string { return string(e) }

// do sends one command to addr over a fresh connection and returns the reply: simple string
// and bulk string → string, nil bulk or nil array → nil, integer → int64, array → []any. An
// error reply is returned as a serverError.
func do(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, adminTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(adminTimeout)); err != nil {
		return nil, err
	}
	if _, err := conn.Write(encode(args)); err != nil {
		return nil, err
	}
	v, err := readReply(bufio.NewReader(conn))
	if err != nil {
		return nil, err
	}
	if e, ok := v.(serverError); ok {
		return nil, e
	}
	return v, nil
}

// encode returns args as a RESP array of bulk strings.
func encode(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply reads one RESP2 reply. An error reply is a serverError value; the error result
// is for I/O and protocol failures.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("conformance: malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return serverError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$', '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err // nil bulk string or nil array
		}
		if line[0] == '$' {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return nil, err
			}
			return string(buf[:n]), nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("conformance: unknown reply type %q", line[0])
}

// subscription is a raw SUBSCRIBE connection: it proves what the server published,
// independently of the Node's own Subscriber.
type subscription struct {
	conn     net.Conn
	messages chan string // the channel name of every message received
	done     chan struct{}
}

// subscribe opens a connection to addr subscribed to channel, and returns once the server
// has confirmed the subscription. Close it with close.
func subscribe(addr, channel string) (*subscription, error) {
	conn, err := net.DialTimeout("tcp", addr, adminTimeout)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(adminTimeout))
	if _, err := conn.Write(encode([]string{"SUBSCRIBE", channel})); err != nil {
		conn.Close()
		return nil, err
	}
	if v, err := readReply(r); err != nil {
		conn.Close()
		return nil, err
	} else if arr, _ := v.([]any); len(arr) != 3 || arr[0] != "subscribe" {
		conn.Close()
		return nil, fmt.Errorf("conformance: SUBSCRIBE replied %#v", v)
	}
	_ = conn.SetDeadline(time.Time{})
	s := &subscription{conn: conn, messages: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			v, err := readReply(r)
			if err != nil {
				return
			}
			if arr, _ := v.([]any); len(arr) == 3 && arr[0] == "message" {
				ch, _ := arr[1].(string)
				select {
				case s.messages <- ch:
				default:
				}
			}
		}
	}()
	return s, nil
}

// next waits up to timeout for a message and returns its channel, or false.
func (s *subscription) next(timeout time.Duration) (string, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ch := <-s.messages:
		return ch, true
	case <-timer.C:
		return "", false
	}
}

// close closes the connection and waits for its reader.
func (s *subscription) close() {
	s.conn.Close()
	<-s.done
}
