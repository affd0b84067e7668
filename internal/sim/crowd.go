package sim

import (
	"context"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
)

// The crowd workload: a queue with more lapsed waiters ahead of a live one than a script
// forgets per call (64). A crowd client takes the lock as a writer, starts crowdReaders
// goroutines that wait for it as readers (readers take no place in their Client's queue:
// each waits in Redis, one place each), and dies (crowdDies) holding it: it sends and hears
// nothing more, its lock expires by its TTL, and its readers' places lapse. The run's
// actors, which start one after another (crowdStagger apart, so that their order is clear),
// wait behind them for the lock, as writers (Mutex, RWMutex) or readers, or try it once
// (TryLock): once the lock is free, the first live waiter must get it, and none that began
// later, nor a caller that does not wait (fifo, where every node answers in time), nor may
// the lock stay free while a live one waits (idle).
//
// It catches a scan that runs out past 64 lapsed waiters and reads as "no one ahead".
const wCrowd = "crowd"

const (
	crowdReaders = 80
	crowdDies    = 150 * time.Millisecond // after the run's start
	crowdStagger = 150 * time.Millisecond
)

// runCrowd is the crowd client's part: it returns once the crowd has died, and its
// goroutines have stopped.
func runCrowd(ctx context.Context, a *actor, c *redlock.Client) {
	rw := c.NewRWMutex(lockName)
	if err := rw.LockContext(ctx); err != nil {
		a.env.rec.note("crowd not granted: %v", err)
		return
	}
	h := &held{h: holding{client: a.id, role: writer, token: rw.Token(), fenced: true}, lost: rw.Lost()}
	i := a.env.rec.granted(h.h)
	h.since = time.Now()
	stop := make(chan struct{})
	defer close(stop)
	var readers sync.WaitGroup
	dctx, cancel := context.WithCancel(ctx)
	for range crowdReaders {
		readers.Go(func() {
			if rw.RLockContext(dctx) == nil {
				a.env.rec.note("crowd reader granted") // it cannot be: the crowd holds the write lock
			}
		})
	}
	go a.watch(i, h, stop)
	a.sleep(time.Until(a.env.rec.start.Add(crowdDies)))
	// Dead: its readers' calls go nowhere; they wait until the run's end, then stop.
	<-ctx.Done()
	cancel()
	readers.Wait()
}
