package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// servers returns the lock's Redis masters and the storage's Redis: REDIS_ADDRS and
// STORAGE_ADDR (by default the first of REDIS_ADDRS; the store's key differs from the
// lock's keys), or else 3 + 1 embedded miniredis servers. stop shuts down what it started.
func servers(out io.Writer) (lock []string, storage string, stop func(), err error) {
	if env := os.Getenv("REDIS_ADDRS"); env != "" {
		for _, addr := range strings.Split(env, ",") {
			if addr = strings.TrimSpace(addr); addr != "" {
				lock = append(lock, addr)
			}
		}
		storage = os.Getenv("STORAGE_ADDR")
		if storage == "" && len(lock) > 0 {
			storage = lock[0]
		}
		return lock, storage, func() {}, nil
	}

	var started []*miniredis.Miniredis
	for range 4 {
		m, err := miniredis.Run()
		if err != nil {
			for _, m := range started {
				m.Close()
			}
			return nil, "", nil, fmt.Errorf("start embedded Redis: %w", err)
		}
		started = append(started, m)
	}
	stopClock := expireInRealTime(started)
	stop = func() {
		stopClock()
		for _, m := range started {
			m.Close()
		}
	}
	for _, m := range started[:3] {
		lock = append(lock, m.Addr())
	}
	fmt.Fprintln(out, "REDIS_ADDRS is not set: started 3 embedded Redis servers for the lock and 1 for the storage (miniredis)")
	return lock, started[3].Addr(), stop, nil
}

// expireInRealTime makes embedded servers expire keys as time passes, as Redis does:
// miniredis counts TTLs down only when told to (FastForward). It returns a function that
// stops it.
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
