package subs_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/internal/subs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// server is a Conn that plays a server: it applies each command to its set of subscribed
// channels as it is sent, and answers a SUBSCRIBE with Confirmed from its own goroutine, in
// order. A command of a channel in block waits until that channel is released.
type server struct {
	mu      sync.Mutex
	reg     *subs.Registry
	subbed  map[string]bool
	log     []string
	block   map[string]chan struct{} // closed to release
	entered chan string              // a blocked command has started
	answers chan string
	done    chan struct{}
}

func newServer() *server {
	s := &server{subbed: map[string]bool{}, block: map[string]chan struct{}{}, entered: make(chan string, 100), answers: make(chan string, 10000), done: make(chan struct{})}
	s.reg = subs.New(s)
	go func() {
		defer close(s.done)
		for ch := range s.answers {
			s.reg.Confirmed(ch)
		}
	}()
	return s
}

func (s *server) gate(channel string) {
	s.mu.Lock()
	b := s.block[channel]
	s.mu.Unlock()
	if b != nil {
		s.entered <- channel
		<-b
	}
}

func (s *server) Subscribe(_ context.Context, channel string) error {
	s.gate(channel)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subbed[channel] = true
	s.log = append(s.log, "SUBSCRIBE "+channel)
	s.answers <- channel
	return nil
}

func (s *server) Unsubscribe(_ context.Context, channel string) {
	s.gate(channel)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subbed, channel)
	s.log = append(s.log, "UNSUBSCRIBE "+channel)
}

func (s *server) Start() {}

func (s *server) subscribed(channel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subbed[channel]
}

func (s *server) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *server) close(t *testing.T) {
	s.reg.Close()
	s.reg.Wait()
	close(s.answers)
	<-s.done
}

// No command is sent under the Registry's lock: while the server holds a SUBSCRIBE of one
// channel, other channels are subscribed, receive messages and are unsubscribed, and the
// blocked channel's own waiter gives up at its context's end.
func TestNoIOUnderLock(t *testing.T) {
	s := newServer()
	defer s.close(t)
	release := make(chan struct{})
	s.block["slow"] = release

	ctx, cancel := context.WithCancel(context.Background())
	slow := make(chan error, 1)
	go func() {
		_, err := s.reg.Subscribe(ctx, "slow", func(string) {})
		slow <- err
	}()
	require.Equal(t, "slow", <-s.entered, "SUBSCRIBE slow is under way, and held")

	done := make(chan struct{})
	go func() {
		defer close(done)
		var got []string
		un, err := s.reg.Subscribe(context.Background(), "fast", func(p string) { got = append(got, p) })
		if !assert.NoError(t, err) {
			return
		}
		s.reg.Message("fast", "m")
		s.reg.Message("slow", "not ours")
		assert.Equal(t, []string{"m"}, got)
		un()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Subscribe of another channel waited for the held SUBSCRIBE: I/O under the lock")
	}
	require.Eventually(t, func() bool { return !s.subscribed("fast") }, 5*time.Second, time.Millisecond, "fast left")

	cancel()
	select {
	case err := <-slow:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Subscribe did not return at its context's end while its SUBSCRIBE was held")
	}
	close(release)
	// The held SUBSCRIBE is confirmed, nobody wants it any more: it is undone.
	require.Eventually(t, func() bool { return !s.subscribed("slow") }, 5*time.Second, time.Millisecond, "slow left")
	require.Eventually(t, s.reg.Idle, 5*time.Second, time.Millisecond)
}

// An Unsubscribe racing a Subscribe of the same channel: the last callback leaves while the
// server holds its UNSUBSCRIBE, a new Subscribe comes meanwhile. The commands reach the
// server in order, and the new Subscribe returns only once its own SUBSCRIBE was confirmed.
func TestUnsubscribeRacingSubscribe(t *testing.T) {
	s := newServer()
	defer s.close(t)
	un, err := s.reg.Subscribe(context.Background(), "ch", func(string) {})
	require.NoError(t, err)

	release := make(chan struct{})
	s.mu.Lock()
	s.block["ch"] = release
	s.mu.Unlock()
	un()
	require.Equal(t, "ch", <-s.entered, "UNSUBSCRIBE ch is under way, and held")

	var calls []string
	var mu sync.Mutex
	back := make(chan error, 1)
	go func() {
		_, err := s.reg.Subscribe(context.Background(), "ch", func(p string) { mu.Lock(); calls = append(calls, p); mu.Unlock() })
		back <- err
	}()
	select {
	case err := <-back:
		t.Fatalf("Subscribe returned (%v) before its SUBSCRIBE was sent: the server is about to unsubscribe", err)
	case <-time.After(100 * time.Millisecond): // gives a wrong early return time to show
	}
	s.mu.Lock()
	delete(s.block, "ch")
	s.mu.Unlock()
	close(release)
	require.NoError(t, <-back)
	assert.True(t, s.subscribed("ch"), "the server is subscribed when Subscribe returns")
	assert.Equal(t, []string{"SUBSCRIBE ch", "UNSUBSCRIBE ch", "SUBSCRIBE ch"}, s.sent())
}

// Many goroutines subscribe and unsubscribe a few channels, some giving up early, while the
// server answers in its own time: at every quiet point the server is subscribed to exactly
// the channels that have callbacks.
func TestServerStateFollowsCallbacks(t *testing.T) {
	s := newServer()
	defer s.close(t)
	channels := []string{"a", "b", "c"}
	keep := map[string]func(){} // one callback kept on some channels
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(i)))
				for range 20 {
					ch := channels[r.IntN(len(channels))]
					ctx, cancel := context.WithCancel(context.Background())
					if r.IntN(4) == 0 {
						go cancel()
					}
					un, err := s.reg.Subscribe(ctx, ch, func(string) {})
					cancel()
					if err == nil {
						assert.True(t, s.subscribed(ch), "subscribed on the server when Subscribe returns")
						un()
					}
				}
			}()
		}
		wg.Wait()
		want := map[string]bool{}
		for k, un := range keep {
			un()
			delete(keep, k)
		}
		if round%2 == 0 {
			ch := channels[round%len(channels)]
			un, err := s.reg.Subscribe(context.Background(), ch, func(string) {})
			require.NoError(t, err)
			keep[ch], want[ch] = un, true
		}
		for _, ch := range channels {
			require.Eventually(t, func() bool { return s.subscribed(ch) == want[ch] }, 5*time.Second, time.Millisecond, "round %d: %s subscribed: want %v", round, ch, want[ch])
		}
	}
}
