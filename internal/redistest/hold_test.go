package redistest

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestHolding: a command sent through a Holder while it holds runs on the server at once,
// and its reply reaches the client only once the hold is over, on the same connection.
func TestHolding(t *testing.T) {
	if !Available() {
		t.Skip("redis-server not on PATH")
	}
	s := Start(t)
	h := Holding(t, s.Addr())
	conn, err := net.DialTimeout("tcp", h.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	do := func(args ...string) any {
		if _, err := conn.Write(EncodeCommand(args)); err != nil {
			t.Fatal(err)
		}
		v, err := ReadReply(r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := do("PING"); v != "PONG" {
		t.Fatalf("PING through the proxy replied %v", v)
	}
	const hold = 300 * time.Millisecond
	h.Hold(hold)
	start := time.Now()
	if _, err := conn.Write(EncodeCommand([]string{"SET", "k", "v"})); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := s.Do("GET", "k")
		if err != nil {
			t.Fatal(err)
		}
		if v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held command did not run on the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v, err := ReadReply(r); err != nil || v != "OK" {
		t.Fatalf("SET through the proxy replied %v, %v", v, err)
	}
	if elapsed := time.Since(start); elapsed < hold {
		t.Fatalf("the reply came after %v, before the hold of %v was over", elapsed, hold)
	}
}

// TestDropReplyOnce: the first request with the word runs on the server, and its client
// reads EOF instead of the reply; a later connection passes at once.
func TestDropReplyOnce(t *testing.T) {
	if !Available() {
		t.Skip("redis-server not on PATH")
	}
	s := Start(t)
	addr, dropped := DropReplyOnce(t, s.Addr(), "dropword")
	roundTrip := func(args ...string) (any, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(EncodeCommand(args)); err != nil {
			t.Fatal(err)
		}
		return ReadReply(bufio.NewReader(conn))
	}
	if _, err := roundTrip("SET", "dropword", "v"); err == nil {
		t.Fatal("the first request with the word got its reply")
	}
	if !dropped() {
		t.Fatal("dropped reports no dropped reply")
	}
	if v, err := s.Do("GET", "dropword"); err != nil || v != "v" {
		t.Fatalf("the request whose reply was dropped did not run: GET replied %v, %v", v, err)
	}
	if v, err := roundTrip("GET", "dropword"); err != nil || v != "v" {
		t.Fatalf("a later request through the proxy: %v, %v", v, err)
	}
}
