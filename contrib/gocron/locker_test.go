package redlockgocron_test

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/go-redlock/redlock"
	redlockgocron "github.com/go-redlock/redlock/contrib/gocron"
)

// TestLockerOncePerTick runs one job in two schedulers, each with a Locker over a Client of
// its own (as two processes would), on 3 real redis-servers, for 8 ticks of 400 ms; the
// second scheduler's ticks come 50 ms after the first's, as with clocks or start times
// that differ, and the job takes 20 ms, less than that. It proves that the job runs
// exactly once per tick: no tick runs twice (WithMinHold keeps the lock past the job's end,
// so the late scheduler skips the tick), none is missed (the lock is free again by the
// next tick), no two runs overlap; the scheduler that loses a tick is told ErrHeld (the run
// is skipped, not delayed); and the runs' fencing tokens (LeaseFromContext) increase from
// each run to the next.
func TestLockerOncePerTick(t *testing.T) {
	addrs := redisServers(t, 3)
	const (
		interval = 400 * time.Millisecond
		splay    = 50 * time.Millisecond
		ticks    = 8
	)
	type run struct {
		sched int
		at    time.Time
		token uint64
	}
	var (
		mu      sync.Mutex
		runs    []run
		skips   [2]int
		lockErr error // a Lock error other than ErrHeld
		active  atomic.Int32
		overlap atomic.Bool
	)
	t0 := time.Now().Add(time.Second)
	var schedulers []gocron.Scheduler
	for i := range 2 {
		client := newClient(t, addrs)
		locker, err := redlockgocron.NewLocker(client, redlockgocron.WithMinHold(interval/2))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = locker.Close() })
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewJob(
			gocron.DurationJob(interval),
			gocron.NewTask(locker.Job(func(ctx context.Context) error {
				if active.Add(1) > 1 {
					overlap.Store(true)
				}
				defer active.Add(-1)
				lease, ok := redlockgocron.LeaseFromContext(ctx)
				if !ok {
					return errors.New("no lease in the job's context")
				}
				mu.Lock()
				runs = append(runs, run{i, time.Now(), lease.Token()})
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				return nil
			})),
			gocron.WithName("report"),
			gocron.WithStartAt(gocron.WithStartDateTime(t0.Add(time.Duration(i)*splay))),
			gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
				mu.Lock()
				defer mu.Unlock()
				skips[i]++
				if !errors.Is(err, redlock.ErrHeld) && lockErr == nil {
					lockErr = err
				}
			})),
		)
		if err != nil {
			t.Fatal(err)
		}
		schedulers = append(schedulers, s)
	}
	for _, s := range schedulers {
		s.Start()
	}
	// Stop half an interval after the last tick: no tick is then due.
	time.Sleep(time.Until(t0.Add((ticks-1)*interval + interval/2)))
	for _, s := range schedulers {
		if err := s.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if lockErr != nil {
		t.Errorf("a skipped run's Lock error does not match ErrHeld: %v", lockErr)
	}
	if overlap.Load() {
		t.Error("two runs overlapped")
	}
	perTick := make(map[int][]int)
	for _, r := range runs {
		k := int(math.Round(float64(r.at.Sub(t0)) / float64(interval)))
		perTick[k] = append(perTick[k], r.sched)
	}
	for k := range ticks {
		if len(perTick[k]) != 1 {
			t.Errorf("tick %d ran %d times (by schedulers %v), want once", k, len(perTick[k]), perTick[k])
		}
	}
	if len(runs) != ticks {
		t.Errorf("%d runs in %d ticks, want one per tick: %v", len(runs), ticks, perTick)
	}
	if skips[0]+skips[1] < ticks-1 {
		t.Errorf("skipped runs = %v: both schedulers should try each tick, and the loser skip", skips)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].at.Before(runs[j].at) })
	for i := 1; i < len(runs); i++ {
		if runs[i].token <= runs[i-1].token {
			t.Errorf("run %d's fencing token %d is not above run %d's %d", i, runs[i].token, i-1, runs[i-1].token)
		}
	}
	t.Logf("%d runs; skipped: %d by scheduler 0, %d by scheduler 1", len(runs), skips[0], skips[1])
}

// TestLockerLostLockEndsJob runs a wrapped job on 3 real redis-servers with a 600 ms TTL. It
// proves that the lock extends itself while the job runs (the job's context stays live for
// twice the TTL), and that when the servers lose the lock (FLUSHALL behind its back) the
// job's context ends, with a cause matching ErrLockLost and redlock.ErrLost, the lost
// handler hears of it, and gocron gets the loss as the run's error.
func TestLockerLostLockEndsJob(t *testing.T) {
	addrs := redisServers(t, 3)
	const ttl = 600 * time.Millisecond
	client := newClient(t, addrs)
	lost := make(chan error, 1)
	locker, err := redlockgocron.NewLocker(client,
		redlockgocron.WithLockOptions(redlock.WithTTL(ttl)),
		redlockgocron.WithLockLostHandler(func(key string, err error) {
			if key != "report" {
				err = errors.Join(err, errors.New("wrong key "+key))
			}
			lost <- err
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()

	started := make(chan context.Context, 1)
	jobErr := make(chan error, 1)
	_, err = s.NewJob(
		gocron.DurationJob(time.Hour),
		gocron.NewTask(locker.Job(func(ctx context.Context) error {
			started <- ctx
			<-ctx.Done()
			return nil
		})),
		gocron.WithName("report"),
		gocron.WithStartAt(gocron.WithStartImmediately()),
		gocron.WithEventListeners(gocron.AfterJobRunsWithError(func(_ uuid.UUID, _ string, err error) { jobErr <- err })),
	)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	ctx := waitFor(t, started, 10*time.Second, "the job did not start")

	time.Sleep(2 * ttl)
	if err := ctx.Err(); err != nil {
		t.Fatalf("the job's context ended while the lock extends itself: %v (cause %v)", err, context.Cause(ctx))
	}
	other := newClient(t, addrs)
	if _, err := other.TryAcquire(context.Background(), redlockgocron.DefaultKeyPrefix+"report"); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("another client's TryAcquire while the job runs past its TTL: %v, want ErrHeld", err)
	}

	flushAll(t, addrs)
	waitFor(t, ctx.Done(), 10*time.Second, "the job's context did not end when the lock was lost")
	if cause := context.Cause(ctx); !errors.Is(cause, redlockgocron.ErrLockLost) || !errors.Is(cause, redlock.ErrLost) {
		t.Errorf("cause = %v, want ErrLockLost and redlock.ErrLost", cause)
	}
	if err := waitFor(t, lost, 10*time.Second, "the lost handler was not called"); !errors.Is(err, redlockgocron.ErrLockLost) || !errors.Is(err, redlock.ErrLost) {
		t.Errorf("lost handler's error = %v, want ErrLockLost and redlock.ErrLost", err)
	}
	if err := waitFor(t, jobErr, 10*time.Second, "gocron got no error for the run"); !errors.Is(err, redlockgocron.ErrLockLost) {
		t.Errorf("the run's error = %v, want ErrLockLost", err)
	}
}

// TestLockerSkipsWithoutWaiting proves TryAcquire semantics on miniredis: while one Locker
// holds a job's lock (10 s TTL), another's Lock fails at once with ErrHeld; Unlock releases
// it, and the other takes it next. Unlock twice fails with ErrNotLocked, and Lock after
// Close with ErrClosed.
func TestLockerSkipsWithoutWaiting(t *testing.T) {
	_, addr := miniRedis(t)
	a, err := redlockgocron.NewLocker(newClient(t, []string{addr}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := redlockgocron.NewLocker(newClient(t, []string{addr}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	la, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.Lock(ctx, "job"); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("second Lock: %v, want ErrHeld", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second Lock took %v: it must not wait", d)
	}
	if _, err := a.Lock(ctx, "job"); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("Lock by the same Locker while held: %v, want ErrHeld", err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := la.Unlock(ctx); !errors.Is(err, redlockgocron.ErrNotLocked) {
		t.Errorf("second Unlock: %v, want ErrNotLocked", err)
	}
	lb, err := b.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, "job"); !errors.Is(err, redlockgocron.ErrClosed) {
		t.Errorf("Lock after Close: %v, want ErrClosed", err)
	}
}

// TestLockerMinHold proves WithMinHold on miniredis: Unlock returns at once, the lock stays
// held (another Locker is refused) until the minimum hold has passed, and is free after it;
// Close releases a lock kept by the minimum hold at once.
func TestLockerMinHold(t *testing.T) {
	_, addr := miniRedis(t)
	const minHold = 400 * time.Millisecond
	a, err := redlockgocron.NewLocker(newClient(t, []string{addr}), redlockgocron.WithMinHold(minHold))
	if err != nil {
		t.Fatal(err)
	}
	b, err := redlockgocron.NewLocker(newClient(t, []string{addr}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	la, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Lock(ctx, "job")
	switch {
	case err == nil && time.Since(start) < minHold:
		t.Fatal("another Locker took the lock within the minimum hold")
	case err != nil && !errors.Is(err, redlock.ErrHeld):
		t.Fatalf("Lock within the minimum hold: %v, want ErrHeld", err)
	case err != nil: // held, as it should be; it is free once the minimum hold has passed
		eventually(t, 10*time.Second, "the lock was not released after the minimum hold", func() bool {
			lb, err = b.Lock(ctx, "job")
			return err == nil
		})
	}
	if d := time.Since(start); d < minHold {
		t.Errorf("the lock was free %v after Lock began, before the minimum hold of %v", d, minHold)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	a2, err := redlockgocron.NewLocker(newClient(t, []string{addr}), redlockgocron.WithMinHold(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	la, err = a2.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, "job"); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("Lock within an hour's minimum hold: %v, want ErrHeld", err)
	}
	if err := a2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	lb, err = b.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock after the holder's Close: %v", err)
	}
	_ = lb.Unlock(ctx)
}

// TestLockerJobNotLocked proves that Job does not run its function without the run's lock,
// on miniredis: for a context that Lock was not given (a job that is not locked with this
// Locker), the wrapper returns ErrNotLocked; and after the lock was lost (keys deleted), a
// run whose context Lock was given does not start, and Unlock reports the loss.
func TestLockerJobNotLocked(t *testing.T) {
	srv, addr := miniRedis(t)
	locker, err := redlockgocron.NewLocker(newClient(t, []string{addr}),
		redlockgocron.WithLockOptions(redlock.WithTTL(300*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	called := false
	job := locker.Job(func(context.Context) error { called = true; return nil })

	jobCtx, cancel := context.WithCancel(context.Background()) // as gocron makes per job
	defer cancel()
	if err := job(jobCtx); !errors.Is(err, redlockgocron.ErrNotLocked) || called {
		t.Fatalf("job without a lock: %v (called %v), want ErrNotLocked and not called", err, called)
	}

	lk, err := locker.Lock(jobCtx, "job")
	if err != nil {
		t.Fatal(err)
	}
	lease := lk.(*redlockgocron.Lock).Lease()
	srv.FlushAll()
	waitFor(t, lease.Done(), 10*time.Second, "the lease did not end after its keys were deleted")
	if err := job(jobCtx); !errors.Is(err, redlockgocron.ErrLockLost) || !errors.Is(err, redlock.ErrLost) || called {
		t.Fatalf("job after the loss: %v (called %v), want ErrLockLost and ErrLost, not called", err, called)
	}
	if err := lk.Unlock(jobCtx); !errors.Is(err, redlockgocron.ErrLockLost) {
		t.Errorf("Unlock after the loss: %v, want ErrLockLost", err)
	}
	if err := job(jobCtx); !errors.Is(err, redlockgocron.ErrNotLocked) {
		t.Errorf("job after Unlock: %v, want ErrNotLocked", err)
	}
}

// TestNewLockerInvalid checks NewLocker's refusals.
func TestNewLockerInvalid(t *testing.T) {
	if _, err := redlockgocron.NewLocker(nil); err == nil {
		t.Error("NewLocker(nil): no error")
	}
	_, addr := miniRedis(t)
	if _, err := redlockgocron.NewLocker(newClient(t, []string{addr}), redlockgocron.WithMinHold(-time.Second)); err == nil {
		t.Error("WithMinHold(-1s): no error")
	}
	// A nil option is ignored, as redlock.New ignores one: never a panic.
	l, err := redlockgocron.NewLocker(newClient(t, []string{addr}), nil, redlockgocron.WithKeyPrefix("p:"))
	if err != nil {
		t.Fatalf("NewLocker with a nil option: %v", err)
	}
	_ = l.Close()
}
