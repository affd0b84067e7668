package redlockgocron_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/go-redlock/redlock"
	redlockgocron "github.com/go-redlock/redlock/contrib/gocron"
)

// TestElectorOnlyLeaderRuns runs one job every 100 ms in two schedulers, each with an
// Elector over a Client of its own, on 3 real redis-servers. It proves that only the
// leader's scheduler runs the job (the follower runs it never), that every candidate reads
// the leader's value, and that when the leader resigns (Close) the other takes over and
// runs the job, while the resigned one runs it no more; at no moment did both lead.
func TestElectorOnlyLeaderRuns(t *testing.T) {
	addrs := redisServers(t, 3)
	ctx := context.Background()
	var (
		mu   sync.Mutex
		runs = map[string][]time.Time{}
	)
	newScheduler := func(e *redlockgocron.Elector, name string) gocron.Scheduler {
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewJob(gocron.DurationJob(100*time.Millisecond),
			gocron.NewTask(e.Job(func(context.Context) error {
				mu.Lock()
				runs[name] = append(runs[name], time.Now())
				mu.Unlock()
				return nil
			})),
			gocron.WithName("report"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	count := func(name string, after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, at := range runs[name] {
			if at.After(after) {
				n++
			}
		}
		return n
	}

	a, err := redlockgocron.NewElector(ctx, newClient(t, addrs), "scheduler", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	eventually(t, 10*time.Second, "a did not lead", func() bool { return a.IsLeader(ctx) == nil })
	b, err := redlockgocron.NewElector(ctx, newClient(t, addrs), "scheduler", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// Watch that b never leads while a does (b is read first: a never leads again once b
	// has, so a yes from a after a yes from b means both led at once).
	var both atomic.Bool
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if b.IsLeader(ctx) == nil && a.IsLeader(ctx) == nil {
				both.Store(true)
			}
		}
	}()
	defer func() {
		close(stopWatch)
		<-watched
		if both.Load() {
			t.Error("a and b led at the same time")
		}
	}()

	sa, sb := newScheduler(a, "a"), newScheduler(b, "b")
	defer sa.Shutdown()
	defer sb.Shutdown()
	begin := time.Now()
	sa.Start()
	sb.Start()
	eventually(t, 10*time.Second, "the leader's scheduler did not run the job 5 times", func() bool { return count("a", begin) >= 5 })
	if err := b.IsLeader(ctx); !errors.Is(err, redlockgocron.ErrNotLeader) {
		t.Errorf("b.IsLeader = %v, want ErrNotLeader", err)
	}
	if n := count("b", begin); n != 0 {
		t.Fatalf("the follower's scheduler ran the job %d times", n)
	}
	if v, err := b.Leader(ctx); err != nil || v != "a" {
		t.Errorf("b.Leader = %q, %v; want a", v, err)
	}

	if err := a.Close(); err != nil {
		t.Fatalf("a.Close: %v", err)
	}
	closed := time.Now()
	if err := a.IsLeader(ctx); !errors.Is(err, redlockgocron.ErrNotLeader) || !errors.Is(err, redlockgocron.ErrClosed) {
		t.Errorf("a.IsLeader after Close = %v, want ErrNotLeader and ErrClosed", err)
	}
	eventually(t, 10*time.Second, "b did not take over", func() bool { return b.IsLeader(ctx) == nil })
	eventually(t, 10*time.Second, "b's scheduler did not run the job 5 times", func() bool { return count("b", closed) >= 5 })
	// A run of a that had passed IsLeader just before Close may record its time just after.
	if n := count("a", closed.Add(100*time.Millisecond)); n != 0 {
		t.Errorf("a's scheduler ran the job %d times after a resigned", n)
	}
	if v, err := a.Leader(ctx); err != nil || v != "b" {
		t.Errorf("a.Leader = %q, %v; want b", v, err)
	}
}

// TestElectorRecampaigns proves, on miniredis with a 300 ms TTL, that an Elector that
// loses leadership (its keys deleted behind its back) reports it (WithLeadershipLostHandler,
// ErrLockLost and redlock.ErrLost), ends the context of a job wrapped with Job, says no
// from IsLeader, and campaigns again until it leads again.
func TestElectorRecampaigns(t *testing.T) {
	srv, addr := miniRedis(t)
	ctx := context.Background()
	lost := make(chan error, 1)
	e, err := redlockgocron.NewElector(ctx, newClient(t, []string{addr}), "scheduler", "a",
		redlockgocron.WithElectionOptions(redlock.WithTTL(300*time.Millisecond)),
		redlockgocron.WithLeadershipLostHandler(func(err error) {
			select {
			case lost <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	eventually(t, 10*time.Second, "the candidate did not lead", func() bool { return e.IsLeader(ctx) == nil })
	first := e.Lease()

	started := make(chan context.Context, 1)
	jobErr := make(chan error, 1)
	go func() {
		jobErr <- e.Job(func(ctx context.Context) error {
			started <- ctx
			<-ctx.Done()
			return errors.New("stopped")
		})(context.Background())
	}()
	jobCtx := waitFor(t, started, 10*time.Second, "the wrapped job did not start")
	if l, ok := redlockgocron.LeaseFromContext(jobCtx); !ok || l != first {
		t.Errorf("LeaseFromContext = %p, %v; want the leader's lease %p", l, ok, first)
	}

	srv.FlushAll()
	if err := waitFor(t, lost, 10*time.Second, "the loss was not reported"); !errors.Is(err, redlockgocron.ErrLockLost) || !errors.Is(err, redlock.ErrLost) {
		t.Errorf("lost handler's error = %v, want ErrLockLost and redlock.ErrLost", err)
	}
	waitFor(t, jobCtx.Done(), 10*time.Second, "the job's context did not end")
	if err := waitFor(t, jobErr, 10*time.Second, "the job did not return"); !errors.Is(err, redlockgocron.ErrLockLost) || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("the wrapped job's error = %v, want its own joined with ErrLockLost", err)
	}
	eventually(t, 10*time.Second, "the candidate did not lead again", func() bool { return e.IsLeader(ctx) == nil })
	if e.Lease() == first {
		t.Error("leading again with the lost lease")
	}
}

// TestElectorJobEndsOnResign proves, on miniredis, that Close ends a wrapped job's context
// (ErrLockLost and redlock.ErrReleased), that Job refuses to run a job (ErrNotLeader) when
// the candidate does not lead, and that the end of NewElector's context resigns.
func TestElectorJobEndsOnResign(t *testing.T) {
	_, addr := miniRedis(t)
	client := newClient(t, []string{addr})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := redlockgocron.NewElector(ctx, client, "scheduler", "a")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a did not lead", func() bool { return a.IsLeader(ctx) == nil })
	b, err := redlockgocron.NewElector(context.Background(), newClient(t, []string{addr}), "scheduler", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	called := false
	if err := b.Job(func(context.Context) error { called = true; return nil })(ctx); !errors.Is(err, redlockgocron.ErrNotLeader) || called {
		t.Errorf("follower's job: %v (called %v), want ErrNotLeader, not called", err, called)
	}

	started := make(chan context.Context, 1)
	jobErr := make(chan error, 1)
	go func() {
		jobErr <- a.Job(func(ctx context.Context) error {
			started <- ctx
			<-ctx.Done()
			return nil
		})(context.Background())
	}()
	jobCtx := waitFor(t, started, 10*time.Second, "the wrapped job did not start")
	cancel() // NewElector's context: a resigns
	waitFor(t, jobCtx.Done(), 10*time.Second, "the job's context did not end on resignation")
	if cause := context.Cause(jobCtx); !errors.Is(cause, redlockgocron.ErrLockLost) || !errors.Is(cause, redlock.ErrReleased) {
		t.Errorf("cause = %v, want ErrLockLost and redlock.ErrReleased", cause)
	}
	if err := waitFor(t, jobErr, 10*time.Second, "the job did not return"); !errors.Is(err, redlockgocron.ErrLockLost) {
		t.Errorf("the wrapped job's error = %v, want ErrLockLost", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after the context ended: %v", err)
	}
	eventually(t, 10*time.Second, "b did not take over", func() bool { return b.IsLeader(context.Background()) == nil })
}

// TestNewElectorInvalid checks NewElector's refusals, and that an error redlock finds
// (a name that is too long) stops the campaign and comes with IsLeader's error.
func TestNewElectorInvalid(t *testing.T) {
	_, addr := miniRedis(t)
	client := newClient(t, []string{addr})
	ctx := context.Background()
	for name, f := range map[string]func() (*redlockgocron.Elector, error){
		"nil client":  func() (*redlockgocron.Elector, error) { return redlockgocron.NewElector(ctx, nil, "n", "v") },
		"empty name":  func() (*redlockgocron.Elector, error) { return redlockgocron.NewElector(ctx, client, "", "v") },
		"empty value": func() (*redlockgocron.Elector, error) { return redlockgocron.NewElector(ctx, client, "n", "") },
		"negative retry": func() (*redlockgocron.Elector, error) {
			return redlockgocron.NewElector(ctx, client, "n", "v", redlockgocron.WithCampaignRetry(-1))
		},
		"nil context": func() (*redlockgocron.Elector, error) {
			var none context.Context // a caller's nil context
			return redlockgocron.NewElector(none, client, "n", "v")
		},
	} {
		if e, err := f(); err == nil {
			_ = e.Close()
			t.Errorf("%s: no error", name)
		}
	}
	// A nil option is ignored, as redlock.New ignores one: never a panic.
	if e, err := redlockgocron.NewElector(ctx, client, "nil-option", "v", nil, redlockgocron.WithCampaignRetry(time.Second)); err != nil {
		t.Errorf("NewElector with a nil option: %v", err)
	} else {
		_ = e.Close()
	}
	e, err := redlockgocron.NewElector(ctx, client, strings.Repeat("n", redlock.MaxNameLen+1), "v")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	eventually(t, 10*time.Second, "IsLeader does not report the invalid name", func() bool {
		err := e.IsLeader(ctx)
		return errors.Is(err, redlockgocron.ErrNotLeader) && errors.Is(err, redlock.ErrInvalid)
	})
}
