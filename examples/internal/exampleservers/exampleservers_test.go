package exampleservers

import (
	"slices"
	"testing"
)

func TestStartFromEnv(t *testing.T) {
	t.Setenv("REDIS_ADDRS", " a:1, b:2 ,,c:3")
	t.Setenv("DATA_ADDR", "")
	s, err := Start(5, "DATA_ADDR")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !slices.Equal(s.Lock, []string{"a:1", "b:2", "c:3"}) || s.Data != "a:1" || s.Embedded {
		t.Errorf("got lock %q, data %q, embedded %v", s.Lock, s.Data, s.Embedded)
	}
	t.Setenv("DATA_ADDR", "d:4")
	if s, _ := Start(5, "DATA_ADDR"); s.Data != "d:4" {
		t.Errorf("data %q, want d:4", s.Data)
	}
	t.Setenv("REDIS_ADDRS", " , ")
	if _, err := Start(5, ""); err == nil {
		t.Error("REDIS_ADDRS without an address: no error")
	}
}

func TestStartEmbedded(t *testing.T) {
	t.Setenv("REDIS_ADDRS", "")
	s, err := Start(3, "DATA_ADDR")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if len(s.Lock) != 3 || s.Data == "" || !s.Embedded || slices.Contains(s.Lock, s.Data) {
		t.Errorf("got lock %q, data %q, embedded %v", s.Lock, s.Data, s.Embedded)
	}
	s2, err := Start(2, "")
	if err != nil {
		t.Fatal(err)
	}
	s2.Stop()
	if len(s2.Lock) != 2 || s2.Data != "" {
		t.Errorf("got lock %q, data %q", s2.Lock, s2.Data)
	}
}
