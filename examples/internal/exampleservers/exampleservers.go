// Package exampleservers gives the example programs their Redis servers: the ones a user
// names in REDIS_ADDRS, or else embedded in-process servers (miniredis), so that the
// examples run with no Redis installed.
package exampleservers

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Servers are the Redis servers an example runs over.
type Servers struct {
	Lock     []string // the lock's Redis masters, one address each
	Data     string   // a server for the example's own data, if it asked for one
	Embedded bool     // started by Start, in this process, rather than named in REDIS_ADDRS
	stop     func()
}

// Stop shuts down the servers that Start started, if any.
func (s *Servers) Stop() { s.stop() }

// Start returns the servers to run over. If REDIS_ADDRS is set, the lock's masters are its
// comma-separated addresses, and the data server (if dataEnv is not "") is the one in the
// environment variable dataEnv, by default the first of REDIS_ADDRS (the example's keys
// differ from the lock's). Otherwise Start starts n embedded servers for the lock, and one
// more for the data if dataEnv is not "": they listen on 127.0.0.1, on free ports, and
// expire keys as time passes, as Redis does.
func Start(n int, dataEnv string) (*Servers, error) {
	if env := os.Getenv("REDIS_ADDRS"); env != "" {
		s := &Servers{stop: func() {}}
		for _, addr := range strings.Split(env, ",") {
			if addr = strings.TrimSpace(addr); addr != "" {
				s.Lock = append(s.Lock, addr)
			}
		}
		if len(s.Lock) == 0 {
			return nil, fmt.Errorf("REDIS_ADDRS=%q holds no address", env)
		}
		if dataEnv != "" {
			if s.Data = os.Getenv(dataEnv); s.Data == "" {
				s.Data = s.Lock[0]
			}
		}
		return s, nil
	}

	total := n
	if dataEnv != "" {
		total++
	}
	var started []*miniredis.Miniredis
	for range total {
		m, err := miniredis.Run()
		if err != nil {
			for _, m := range started {
				m.Close()
			}
			return nil, fmt.Errorf("start embedded Redis: %w", err)
		}
		started = append(started, m)
	}
	stopClock := expireInRealTime(started)
	s := &Servers{Embedded: true, stop: func() {
		stopClock()
		for _, m := range started {
			m.Close()
		}
	}}
	for _, m := range started[:n] {
		s.Lock = append(s.Lock, m.Addr())
	}
	if dataEnv != "" {
		s.Data = started[n].Addr()
	}
	return s, nil
}

// expireInRealTime makes embedded servers expire keys as time passes, as Redis does (so
// that, say, the lock of a holder that stopped expires with its TTL): miniredis counts TTLs
// down only when told to (FastForward). It returns a function that stops it.
func expireInRealTime(servers []*miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				for _, m := range servers {
					m.FastForward(now.Sub(last))
				}
				last = now
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
