package redlock_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
)

// BenchmarkMutexUncontended: Lock then Unlock of a free Mutex on N real servers, one goroutine.
func BenchmarkMutexUncontended(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			nodes, _ := realNodes(b, n)
			m := newClient(b, nodes).NewMutex("bench")
			b.ReportAllocs()
			for b.Loop() {
				m.Lock()
				//lint:ignore SA2001 the benchmark measures lock+unlock itself
				m.Unlock()
			}
		})
	}
}

// BenchmarkMutexAllUncontended: Lock then Unlock of a free Mutex over two names
// (NewMutexAll) on N real servers, one goroutine: the set scripts, beside
// BenchmarkMutexUncontended's one name.
func BenchmarkMutexAllUncontended(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			nodes, _ := realNodes(b, n)
			m := newClient(b, nodes).NewMutexAll([]string{"bench", "bench2"})
			b.ReportAllocs()
			for b.Loop() {
				m.Lock()
				//lint:ignore SA2001 the benchmark measures lock+unlock itself
				m.Unlock()
			}
		})
	}
}

// BenchmarkRWMutexReadUncontended: RLock then RUnlock of a free RWMutex on N real servers,
// one goroutine: of one name (NewRWMutex), and of two at once (NewRWMutexAll).
func BenchmarkRWMutexReadUncontended(b *testing.B) {
	for _, n := range []int{1, 5} {
		for _, names := range [][]string{{"bench"}, {"bench", "bench2"}} {
			b.Run(fmt.Sprintf("N=%d/names=%d", n, len(names)), func(b *testing.B) {
				nodes, _ := realNodes(b, n)
				c := newClient(b, nodes)
				rw := c.NewRWMutex(names[0])
				if len(names) > 1 {
					rw = c.NewRWMutexAll(names)
				}
				b.ReportAllocs()
				for b.Loop() {
					rw.RLock()
					//lint:ignore SA2001 the benchmark measures rlock+runlock itself
					rw.RUnlock()
				}
			})
		}
	}
}

// BenchmarkGuardedUncontended: an uncontended acquisition and release on 5 real servers with
// the restart guard on, as Clients run by default (so every first attempt runs the acquire
// script, a Mutex's too): a Mutex of one name, a Mutex over two names (NewMutexAll), a
// Semaphore of one permit and a fenced Lease, side by side.
func BenchmarkGuardedUncontended(b *testing.B) {
	servers := realServers(b, 5)
	c := newClient(b, nodesFor(b, servers), redlock.WithRestartGuard(time.Second), redlock.WithTTL(time.Second))
	ctx := ctxT(b, time.Hour)
	warm := c.NewMutex("warm") // fresh servers abstain under the guard: wait it out
	if err := warm.LockContext(ctxT(b, 10*time.Second)); err != nil {
		b.Fatal(err)
	}
	warm.Unlock()
	pair := func(lock func() error, unlock func() error) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := lock(); err != nil {
					b.Fatal(err)
				}
				if err := unlock(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	m, all := c.NewMutex("bench"), c.NewMutexAll([]string{"bench-a", "bench-b"})
	s := c.NewSemaphore("bench-sem", 1)
	var l *redlock.Lease
	b.Run("Mutex", pair(func() error { return m.LockContext(ctx) }, func() error { return m.UnlockContext(ctx) }))
	b.Run("MutexAll/2", pair(func() error { return all.LockContext(ctx) }, func() error { return all.UnlockContext(ctx) }))
	b.Run("Semaphore/K=1", pair(func() (err error) { l, err = s.Acquire(ctx); return err }, func() error { return l.Release(ctx) }))
	b.Run("Lease", pair(func() (err error) { l, err = c.TryAcquire(ctx, "bench-lease"); return err }, func() error { return l.Release(ctx) }))
}

// BenchmarkMutexGuard: Lock then Unlock of a free Mutex on one real server, with the restart
// guard (the default: every acquisition runs the acquire script, which reads the server's
// uptime) and without it (WithRestartGuard(0): a plain SET NX).
func BenchmarkMutexGuard(b *testing.B) {
	servers := realServers(b, 1)
	for _, guard := range []time.Duration{0, time.Second} {
		b.Run(fmt.Sprintf("guard=%v", guard), func(b *testing.B) {
			m := newClient(b, nodesFor(b, servers), redlock.WithRestartGuard(guard), redlock.WithTTL(time.Second)).NewMutex("bench")
			if guard > 0 { // a fresh server abstains under the guard: wait it out
				if err := m.LockContext(ctxT(b, 10*time.Second)); err != nil {
					b.Fatal(err)
				}
				m.Unlock()
			}
			b.ReportAllocs()
			for b.Loop() {
				m.Lock()
				//lint:ignore SA2001 the benchmark measures lock+unlock itself
				m.Unlock()
			}
		})
	}
}

// BenchmarkLeaseUncontended: TryAcquire then Release of a fenced Lease (N > 1 pays the
// fence raise round).
func BenchmarkLeaseUncontended(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			nodes, _ := realNodes(b, n)
			c := newClient(b, nodes)
			ctx := ctxT(b, time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.TryAcquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMutexHandoff: G goroutines, each on its own Client (as separate processes would
// be), take turns on one name. It reports the gap from one holder's Unlock to the next
// holder's Lock returning (p50, p99) and the longest any goroutine waited for the lock.
func BenchmarkMutexHandoff(b *testing.B) {
	for _, n := range []int{1, 5} {
		for _, g := range []int{2, 8, 32} {
			b.Run(fmt.Sprintf("N=%d/G=%d", n, g), func(b *testing.B) {
				servers := realServers(b, n)
				mutexes := make([]*redlock.Mutex, g)
				for i := range mutexes {
					mutexes[i] = newClient(b, nodesFor(b, servers)).NewMutex("handoff")
				}
				var (
					remaining atomic.Int64
					unlocked  atomic.Int64 // UnixNano of the last Unlock, 0 before the first
					mu        sync.Mutex
					gaps      []time.Duration
					longest   time.Duration
					wg        sync.WaitGroup
				)
				remaining.Store(int64(b.N))
				b.ReportAllocs()
				b.ResetTimer()
				for _, m := range mutexes {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for remaining.Add(-1) >= 0 {
							asked := time.Now()
							m.Lock()
							now := time.Now()
							mu.Lock()
							if last := unlocked.Load(); last != 0 {
								gaps = append(gaps, now.Sub(time.Unix(0, last)))
							}
							longest = max(longest, now.Sub(asked))
							mu.Unlock()
							time.Sleep(time.Millisecond) // the critical section
							unlocked.Store(time.Now().UnixNano())
							m.Unlock()
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if len(gaps) > 0 {
					slices.Sort(gaps)
					b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "gap-p50-µs")
					b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds()), "gap-p99-µs")
				}
				b.ReportMetric(float64(longest.Milliseconds()), "longest-wait-ms")
			})
		}
	}
}

// BenchmarkSemaphoreUncontended: Acquire then Release of a free Semaphore's permit on 5 real
// servers, one goroutine, at K = 1, 8 and 64 (beside BenchmarkMutexUncontended/N=5 and
// BenchmarkLeaseUncontended/N=5: a permit is a fenced Lease).
func BenchmarkSemaphoreUncontended(b *testing.B) {
	nodes, _ := realNodes(b, 5)
	c := newClient(b, nodes)
	ctx := ctxT(b, time.Hour)
	for _, k := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("N=5/K=%d", k), func(b *testing.B) {
			s := c.NewSemaphore(fmt.Sprintf("bench-%d", k), k)
			b.ReportAllocs()
			for b.Loop() {
				l, err := s.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandoffThroughput: G = 8 goroutines, each on its own Client, take turns on one
// name with a 1ms critical section, through a Mutex and through a Semaphore of one permit,
// on 5 real servers: ns/op is the time per turn, so the two rows compare throughputs.
func BenchmarkHandoffThroughput(b *testing.B) {
	const g = 8
	servers := realServers(b, 5)
	for _, kind := range []string{"mutex", "semaphore"} {
		b.Run("N=5/"+kind, func(b *testing.B) {
			turn := make([]func() func(), g) // each takes a turn, and returns its end
			for i := range turn {
				c := newClient(b, nodesFor(b, servers))
				if kind == "mutex" {
					m := c.NewMutex("throughput-" + kind)
					turn[i] = func() func() { m.Lock(); return m.Unlock }
					continue
				}
				s := c.NewSemaphore("throughput-"+kind, 1)
				turn[i] = func() func() {
					l, err := s.Acquire(ctxT(b, time.Minute))
					if err != nil {
						b.Error(err)
						return func() {}
					}
					return func() { _ = l.Release(ctxT(b, time.Minute)) }
				}
			}
			var remaining atomic.Int64
			remaining.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, take := range turn {
				wg.Go(func() {
					for remaining.Add(-1) >= 0 {
						end := take()
						time.Sleep(time.Millisecond) // the critical section
						end()
					}
				})
			}
			wg.Wait()
		})
	}
}
