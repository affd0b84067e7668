package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// latency is a set of samples; pct wants it sorted.
type latency []time.Duration

func (l latency) pct(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(float64(len(l))*q+0.999999) - 1
	return l[min(max(i, 0), len(l)-1)]
}

// negatives counts the samples below zero.
func (l latency) negatives() int {
	n := 0
	for _, d := range l {
		if d < 0 {
			n++
		}
	}
	return n
}

// uncontendedResult is test 1 (latency) and test 4 (allocations) of one row at one N.
type uncontendedResult struct {
	lat          latency
	allocs, byts float64 // per lock+unlock pair
	errs         int
}

// uncontendedRun locks and unlocks one free name over and over on one goroutine. Its
// rounds are interleaved with the other rows' (see measureAll), so that a change of the
// machine's state during the run spreads over every row instead of favouring one.
type uncontendedRun struct {
	ctx     context.Context
	c       client
	l       locker
	lat     latency
	mallocs uint64
	bytes   uint64
	errs    int
	lastErr error
}

func (u *uncontendedRun) pair() error {
	if err := u.l.Lock(u.ctx); err != nil {
		return err
	}
	return u.l.Unlock(u.ctx)
}

// warm runs pairs for about 200ms (at least 50): connections, scripts, pools.
func (u *uncontendedRun) warm() error {
	end := time.Now().Add(200 * time.Millisecond)
	for i := 0; i < 50 || time.Now().Before(end) && i < 5000; i++ {
		if err := u.pair(); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// round runs up to count pairs or for d. Allocations are runtime.MemStats deltas: every
// goroutine of the process counts, the drivers' included.
func (u *uncontendedRun) round(d time.Duration, count int) error {
	lat := make(latency, 0, count)
	errs := 0
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	end := time.Now().Add(d)
	for len(lat)+errs < count {
		t := time.Now()
		if t.After(end) {
			break
		}
		if err := u.pair(); err != nil {
			errs++
			u.lastErr = err
			if errs > 100 {
				break
			}
			continue
		}
		lat = append(lat, time.Since(t))
	}
	runtime.ReadMemStats(&m1)
	u.mallocs += m1.Mallocs - m0.Mallocs
	u.bytes += m1.TotalAlloc - m0.TotalAlloc
	u.lat = append(u.lat, lat...)
	u.errs += errs
	if errs > 100 {
		return fmt.Errorf("too many errors, last: %w", u.lastErr)
	}
	return nil
}

func (u *uncontendedRun) result() uncontendedResult {
	slices.Sort(u.lat)
	n := float64(len(u.lat) + u.errs)
	if n == 0 {
		n = 1
	}
	return uncontendedResult{lat: u.lat, allocs: float64(u.mallocs) / n, byts: float64(u.bytes) / n, errs: u.errs}
}

// pingClient makes PING a "lock": to node 0 alone, or to every node in parallel waiting for
// all (the floor's fan-out without the lock), through go-redis with defaults.
type pingClient struct {
	ctx  context.Context
	rdbs []*goredis.Client
}

func newPing(ctx context.Context, addrs []string) *pingClient {
	p := &pingClient{ctx: ctx}
	for _, a := range addrs {
		p.rdbs = append(p.rdbs, goredis.NewClient(&goredis.Options{Addr: a}))
	}
	return p
}

func (p *pingClient) Locker(string) locker { return p }
func (p *pingClient) Close() {
	for _, r := range p.rdbs {
		r.Close()
	}
}
func (p *pingClient) Unlock(context.Context) error { return nil }
func (p *pingClient) Lock(ctx context.Context) error {
	if each(p.rdbs, func(r *goredis.Client) bool { return r.Ping(ctx).Err() == nil }) != len(p.rdbs) {
		return errors.New("PING failed")
	}
	return nil
}

// idlePing measures count PING round trips to addr right after sleeping sleep each, and
// count back to back, with go-redis.
func idlePing(ctx context.Context, addr string, sleep time.Duration, count int) (idle, hot latency, err error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	for i := 0; i < 2*count; i++ {
		if i < count {
			time.Sleep(sleep)
		}
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return nil, nil, err
		}
		if i < count {
			idle = append(idle, time.Since(start))
		} else {
			hot = append(hot, time.Since(start))
		}
	}
	slices.Sort(idle)
	slices.Sort(hot)
	return idle, hot, nil
}

// handoffResult is test 2 of one row at one N and G.
type handoffResult struct {
	gaps      latency // every gap, from the holder's Unlock call
	others    latency // the gaps where the lock went to another goroutine
	returned  latency // every gap from the holder's Unlock return instead (negative: the lock came first)
	acqs      int
	elapsed   time.Duration
	longest   time.Duration
	censored  bool             // longest is a wait still unfinished when the window closed
	calls     map[string]int64 // server commands during the window, summed over the nodes
	errs      int
	lastError error
}

// releases pairs each acquisition's Lock return with its holder's Unlock return, in the
// order of the acquisitions, so that the gaps from the Unlock returns can be taken when the
// window has ended: the next holder's Lock may return before the last holder's Unlock does.
type releases struct {
	locked, returned []time.Time // by acquisition; returned is zero until its Unlock returns
}

// add records an acquisition whose Lock returned at t and gives its index.
func (s *releases) add(t time.Time) int {
	s.locked = append(s.locked, t)
	s.returned = append(s.returned, time.Time{})
	return len(s.locked) - 1
}

// gaps gives, sorted, the time from each holder's Unlock return to the next holder's Lock
// return: negative where the next holder had the lock before the Unlock call returned.
func (s *releases) gaps() latency {
	g := make(latency, 0, len(s.locked))
	for i := 1; i < len(s.locked); i++ {
		if !s.returned[i-1].IsZero() {
			g = append(g, s.locked[i].Sub(s.returned[i-1]))
		}
	}
	slices.Sort(g)
	return g
}

// runHandoff runs g goroutines, each with its own client (as g processes would), that take
// turns on one name for d: Lock, hold for hold, Unlock. A gap is the time from the moment a
// holder calls Unlock to the moment the next holder's Lock returns; the result also has the
// gaps from the moment that Unlock call returned (see releases). The longest wait is the
// longest any goroutine spent inside Lock, counting the waits that the end of the window cut
// short.
//
// think is how long a goroutine waits after its Unlock before its next Lock (0: it asks again
// at once, competing with the waiters).
func runHandoff(ctx context.Context, im impl, addrs []string, name string, g int, hold, think, d time.Duration, maxAcqs int) (handoffResult, error) {
	clients := make([]client, g)
	for i := range clients {
		c, err := im.new(addrs, true)
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return handoffResult{}, err
		}
		clients[i] = c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	// Warm every client's connections on a name of its own.
	for i, c := range clients {
		l := c.Locker(fmt.Sprintf("%s:warm:%d", name, i))
		if err := l.Lock(ctx); err != nil {
			return handoffResult{}, fmt.Errorf("warm-up: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return handoffResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}

	var (
		mu       sync.Mutex
		r        handoffResult
		holder   = -1         // the last goroutine to get the lock; guarded by mu
		rels     releases     // guarded by mu
		unlocked atomic.Int64 // UnixNano of the last Unlock call, 0 before the first
		acqs     atomic.Int64
		wg       sync.WaitGroup
	)
	r.gaps = make(latency, 0, 4096)
	before := commandCalls(addrs)
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, start.Add(d))
	defer cancel()
	for id, c := range clients {
		l := c.Locker(name)
		wg.Add(1)
		goSafe(func() {
			defer wg.Done()
			for rctx.Err() == nil && acqs.Load() < int64(maxAcqs) {
				asked := time.Now()
				err := l.Lock(rctx)
				now := time.Now()
				mu.Lock()
				if wait := now.Sub(asked); wait > r.longest {
					r.longest, r.censored = wait, err != nil
				}
				if err != nil {
					// Past the window's end, an error is its deadline (a driver may report it
					// an instant before rctx does).
					if rctx.Err() == nil && now.Before(start.Add(d)) {
						r.errs++
						r.lastError = err
					}
					mu.Unlock()
					continue
				}
				if last := unlocked.Load(); last != 0 {
					gap := now.Sub(time.Unix(0, last))
					r.gaps = append(r.gaps, gap)
					if holder != id {
						r.others = append(r.others, gap)
					}
				}
				holder = id
				i := rels.add(now)
				mu.Unlock()
				acqs.Add(1)
				time.Sleep(hold)
				unlocked.Store(time.Now().UnixNano())
				err = l.Unlock(context.Background())
				done := time.Now()
				mu.Lock()
				rels.returned[i] = done
				if err != nil {
					r.errs++
					r.lastError = err
				}
				mu.Unlock()
				if think > 0 {
					time.Sleep(think)
				}
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.calls = callsDelta(before, commandCalls(addrs))
	r.acqs = int(acqs.Load())
	slices.Sort(r.gaps)
	slices.Sort(r.others)
	r.returned = rels.gaps()
	return r, nil
}

// throughputRun: goroutines share one client, each locking and unlocking names of its own
// in turn (no contention). Like uncontendedRun, it runs in rounds interleaved with the
// other rows'. Each round uses fresh names, so that a lock left behind by a failed release
// (it waits out its TTL) cannot stall a later round.
type throughputRun struct {
	ctx               context.Context
	c                 client
	addrs             []string // the servers, for their CPU time
	prefix            string
	goroutines, names int
	rounds            int
	pairs             int64
	elapsed           time.Duration
	errs              int64
	lastErr           error
	use               cpuUse // spent while pairs were counted (see cpuUse)
}

func newThroughputRun(ctx context.Context, c client, addrs []string, prefix string, goroutines, names int) *throughputRun {
	return &throughputRun{ctx: ctx, c: c, addrs: addrs, prefix: prefix, goroutines: goroutines, names: names}
}

// round starts the goroutines, lets them warm up for warm, then counts pairs for d.
func (t *throughputRun) round(warm, d time.Duration) {
	t.rounds++
	lockers := make([][]locker, t.goroutines)
	for i := range lockers {
		for k := range t.names {
			lockers[i] = append(lockers[i], t.c.Locker(fmt.Sprintf("%s:r%d:%d:%d", t.prefix, t.rounds, i, k)))
		}
	}
	var (
		count   atomic.Int64
		errs    atomic.Int64
		lastErr atomic.Value
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	// A safety net: a goroutine still waiting a second after the end is cancelled.
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	for _, ls := range lockers {
		wg.Add(1)
		goSafe(func() {
			defer wg.Done()
			for k := 0; !stop.Load(); k++ {
				l := ls[k%len(ls)]
				err := l.Lock(ctx)
				if err == nil {
					err = l.Unlock(context.Background())
				}
				if err != nil {
					if !stop.Load() {
						errs.Add(1)
						lastErr.Store(err)
					}
					continue
				}
				count.Add(1)
			}
		})
	}
	time.Sleep(warm)
	// The CPU samples take a moment (a connection to each server): each is taken just
	// before the count it goes with, so that both windows are alike.
	u0 := sampleUse(t.addrs)
	c0, t0 := count.Load(), time.Now()
	time.Sleep(d)
	u1 := sampleUse(t.addrs)
	c1, t1 := count.Load(), time.Now()
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		cancel()
		<-done
	}
	t.pairs += c1 - c0
	t.elapsed += t1.Sub(t0)
	t.use.client += u1.client - u0.client
	t.use.server += u1.server - u0.server
	if u0.writes < 0 || u1.writes < 0 || t.use.writes < 0 {
		t.use.writes = -1
	} else {
		t.use.writes += u1.writes - u0.writes
	}
	t.errs += errs.Load()
	if e, ok := lastErr.Load().(error); ok {
		t.lastErr = e
	}
}

// perPair returns the client and server CPU time per pair, in µs, and the client's write
// system calls per pair (-1 where unknown).
func (t *throughputRun) perPair() (client, server, writes float64) {
	if t.pairs == 0 {
		return 0, 0, -1
	}
	n := float64(t.pairs)
	writes = -1
	if t.use.writes >= 0 {
		writes = float64(t.use.writes) / n
	}
	return float64(t.use.client.Microseconds()) / n, float64(t.use.server.Microseconds()) / n, writes
}

func (t *throughputRun) rate() float64 {
	if t.elapsed == 0 {
		return 0
	}
	return float64(t.pairs) / t.elapsed.Seconds()
}
