package conformance

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-redlock/redlock/internal/redistest"
)

// The suite prepares and inspects the server through its own tiny RESP2 client, never through
// the Node under test, so that a faulty backend cannot hide its own faults.

// adminTimeout bounds one admin command: dial, write and read.
const adminTimeout = 5 * time.Second

// do sends one command to addr over a fresh connection and returns the reply (see
// redistest.DoTimeout): an error reply is the error result. On a Redis Cluster it follows
// MOVED to the master that serves the command's keys (see redistest.DoCluster).
func do(addr string, args ...string) (any, error) {
	return redistest.DoCluster(addr, adminTimeout, args...)
}

// movedFields returns the fields of a MOVED error message ("MOVED 3999 127.0.0.1:6381"), or
// nil for another message.
func movedFields(msg string) []string {
	if f := strings.Fields(msg); len(f) == 3 && f[0] == "MOVED" {
		return f
	}
	return nil
}

// subscription is a raw SUBSCRIBE connection: it proves what the server published,
// independently of the Node's own Subscriber.
type subscription struct {
	conn     net.Conn
	messages chan [2]string // the channel name of every message received
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
	if _, err := conn.Write(redistest.EncodeCommand([]string{"SUBSCRIBE", channel})); err != nil {
		conn.Close()
		return nil, err
	}
	if v, err := redistest.ReadReply(r); err != nil {
		conn.Close()
		return nil, err
	} else if arr, _ := v.([]any); len(arr) != 3 || arr[0] != "subscribe" {
		conn.Close()
		return nil, fmt.Errorf("conformance: SUBSCRIBE replied %#v", v)
	}
	_ = conn.SetDeadline(time.Time{})
	s := &subscription{conn: conn, messages: make(chan [2]string, 16), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			v, err := redistest.ReadReply(r)
			if err != nil {
				return
			}
			if arr, _ := v.([]any); len(arr) == 3 && arr[0] == "message" {
				ch, _ := arr[1].(string)
				payload, _ := arr[2].(string)
				select {
				case s.messages <- [2]string{ch, payload}:
				default:
				}
			}
		}
	}()
	return s, nil
}

// next waits up to timeout for a message and returns its channel and payload, or false.
func (s *subscription) next(timeout time.Duration) (channel, payload string, ok bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case m := <-s.messages:
		return m[0], m[1], true
	case <-timer.C:
		return "", "", false
	}
}

// close closes the connection and waits for its reader.
func (s *subscription) close() {
	s.conn.Close()
	<-s.done
}
