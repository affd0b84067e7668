package redlockgocron

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-redlock/redlock"
)

// Errors, usable with errors.Is.
var (
	// ErrNotLocked means a run holds no lock of the Locker: Locker.Job was called for a run
	// that gocron did not lock with this Locker, or Unlock was called twice.
	ErrNotLocked = errors.New("redlockgocron: the run holds no lock of this Locker")
	// ErrNotLeader is IsLeader's error, and Elector.Job's, when the Elector's candidate
	// does not lead.
	ErrNotLeader = errors.New("redlockgocron: this scheduler's candidate is not the leader")
	// ErrLockLost is the cause of a wrapped job's context when the lock of its run (or the
	// Elector's leadership) ended while it ran, joined with the lease's reason
	// (redlock.ErrLost, redlock.ErrExpired, redlock.ErrMaxHold or, for an Elector that
	// resigned, redlock.ErrReleased).
	ErrLockLost = errors.New("redlockgocron: lock lost while the job ran")
	// ErrClosed means the Locker or Elector was closed.
	ErrClosed = errors.New("redlockgocron: closed")
)

// DefaultKeyPrefix is the Locker's default prefix of lock names: a job called "report" is
// guarded by the redlock lock called "gocron:report".
const DefaultKeyPrefix = "gocron:"

// Locker is a gocron.Locker over a redlock.Client: give it to gocron.WithDistributedLocker
// or gocron.WithDistributedJobLocker in every process that runs the same jobs. Create it
// with NewLocker. It is safe for concurrent use.
//
// gocron calls Lock before each run of a job, with the job's name as key, skips the run if
// Lock fails, and calls the Lock's Unlock once the job function has returned. Lock makes
// one attempt to take the lock called prefix+key (redlock.Client.TryAcquire): if another
// scheduler (or another run of the same job in this process) holds it, Lock fails with an
// error matching redlock.ErrHeld and the run is skipped, never delayed. The lock extends
// itself while the job runs (redlock.WithAutoExtend), however long that is. gocron ignores
// Unlock's error.
//
// gocron does not let a locker stop a running job (see the package documentation): wrap
// job functions with Job for their context to end when the lock is lost.
type Locker struct {
	client  *redlock.Client
	opts    []redlock.Option
	prefix  string
	minHold time.Duration
	onLost  func(key string, err error)

	mu      sync.Mutex
	closed  bool
	runs    map[context.Context]*Lock // held locks by the context gocron passed to Lock
	holding map[*Lock]*time.Timer     // unlocked locks kept until their WithMinHold ends
}

var _ gocron.Locker = (*Locker)(nil)

// LockerOption configures a Locker (see NewLocker).
type LockerOption func(*Locker) error

// WithLockOptions sets the redlock options of each run's lock, given to
// redlock.Client.TryAcquire after the Client's defaults: redlock.WithTTL,
// redlock.WithNodeTimeout, redlock.WithMaxHold... redlock.WithAutoExtend(true) always
// comes last.
func WithLockOptions(opts ...redlock.Option) LockerOption {
	return func(l *Locker) error {
		l.opts = append(l.opts, opts...)
		return nil
	}
}

// WithKeyPrefix sets the prefix of the lock names: the lock of a job called key is
// prefix+key. Default DefaultKeyPrefix ("gocron:"); it may be empty.
func WithKeyPrefix(prefix string) LockerOption {
	return func(l *Locker) error {
		l.prefix = prefix
		return nil
	}
}

// WithMinHold keeps each run's lock at least d after Lock began, even if the job returns
// sooner: Unlock then returns at once and the lock is released when d has passed (or at
// Close). That is how the Locker absorbs the time splay between schedulers that gocron
// leaves to lockers: without it, a job that takes less time than the gap between two
// schedulers' ticks is run by both, one after the other. Choose d longer than the clocks
// and start times of the schedulers differ, and shorter than the job's interval minus a
// round trip (or the next tick finds the lock still held, by its own scheduler, and is
// skipped). Default 0: Unlock releases at once. It must not be negative.
func WithMinHold(d time.Duration) LockerOption {
	return func(l *Locker) error {
		if d < 0 {
			return fmt.Errorf("redlockgocron: WithMinHold(%v): negative", d)
		}
		l.minHold = d
		return nil
	}
}

// WithLockLostHandler sets a function called, in a goroutine of its own, when the lock of
// a run ends otherwise than by Unlock (or Close): key is the job's name and err matches
// ErrLockLost and the reason (redlock.ErrLost: the nodes no longer hold it;
// redlock.ErrExpired: extensions failed until its validity ran out; redlock.ErrMaxHold).
// It is called whether or not the job was wrapped with Job, and also for a lock that is
// lost while WithMinHold keeps it after its job returned. Default none.
func WithLockLostHandler(f func(key string, err error)) LockerOption {
	return func(l *Locker) error {
		l.onLost = f
		return nil
	}
}

// NewLocker returns a Locker that takes its locks through client. It fails if client is
// nil or an option is invalid (a nil option is ignored); the redlock options of WithLockOptions are checked by the
// first Lock, whose error (matching redlock.ErrInvalid) gocron then hands to
// gocron.AfterLockError on every run.
func NewLocker(client *redlock.Client, opts ...LockerOption) (*Locker, error) {
	if client == nil {
		return nil, errors.New("redlockgocron: NewLocker: nil client")
	}
	l := &Locker{
		client:  client,
		prefix:  DefaultKeyPrefix,
		runs:    make(map[context.Context]*Lock),
		holding: make(map[*Lock]*time.Timer),
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(l); err != nil {
			return nil, err
		}
	}
	l.opts = append(l.opts, redlock.WithAutoExtend(true))
	return l, nil
}

// Lock makes one attempt to take the lock of the job called key, and returns it; the lock
// extends itself until Unlock. gocron calls it before each run, with the job's context and
// name. It fails, and gocron skips the run, if another owner holds the lock (an error
// matching redlock.ErrHeld), too few nodes answer (redlock.ErrNoQuorum), ctx has ended, the
// Locker is closed (ErrClosed), or the name or an option is invalid (redlock.ErrInvalid).
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if l.isClosed() {
		return nil, fmt.Errorf("redlockgocron: lock %q: %w", key, ErrClosed)
	}
	start := time.Now()
	lease, err := l.client.TryAcquire(ctx, l.prefix+key, l.opts...)
	if err != nil {
		return nil, err
	}
	lk := &Lock{locker: l, key: key, lease: lease, start: start}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = lease.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("redlockgocron: lock %q: %w", key, ErrClosed)
	}
	// gocron passes the same context to Lock and to the job function: Job finds the run's
	// lock by it. Only contexts that are pointers are registered, as those are distinct per
	// job (gocron's are); a value such as context.Background() is equal to every other.
	if ctx != nil && reflect.ValueOf(ctx).Kind() == reflect.Pointer {
		if _, taken := l.runs[ctx]; !taken {
			l.runs[ctx] = lk
			lk.ctx = ctx
		}
	}
	l.mu.Unlock()
	if l.onLost != nil {
		go lk.watch()
	}
	return lk, nil
}

// Close releases at once the locks that WithMinHold keeps after their jobs returned, and
// makes later calls of Lock fail with ErrClosed (gocron then skips every run). Locks of
// running jobs stay held until their Unlock, which then releases them at once. It returns
// the releases' errors, joined; later calls return nil. It does not close the Client.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	// A lock taken out of holding here is released here; one whose timer has already
	// fired and taken it out is released by the timer.
	var pending []*Lock
	for lk, timer := range l.holding {
		timer.Stop()
		pending = append(pending, lk)
	}
	clear(l.holding)
	l.mu.Unlock()
	var errs []error
	for _, lk := range pending {
		if err := lk.lease.Release(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *Locker) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Job wraps a job function so that it runs only under the lock that gocron took for the
// run with this Locker, and its context ends when that lock is lost. Give the result to
// gocron.NewTask, without a context parameter: gocron passes the job's context, as it
// passes it to Lock, and Job finds the run's lock by it.
//
// fn's context is the job's context (so it also ends when gocron shuts down), with the
// run's Lease (see LeaseFromContext), cancelled as soon as the lease ends while fn runs:
// its cause (context.Cause) then matches ErrLockLost and the lease's reason. The lease ends
// at the latest at its Until, and, when the nodes lose the lock behind its back, at the
// next extension (when a third of its validity is left). fn should then stop touching what
// the lock protects.
//
// The wrapper returns fn's error, joined with that cause if the lock was lost while fn
// ran, so gocron counts the run as failed. It does not call fn, and returns an error
// matching ErrNotLocked, if the run holds no lock of this Locker: the job is not locked
// with it, or the scheduler also has an Elector (gocron then calls no locker), or the
// task's parameters start with a context of their own (use gocron.WithContext instead).
// It does not call fn either if the lock is already lost when the run starts.
func (l *Locker) Job(fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var lk *Lock
		if ctx != nil && reflect.ValueOf(ctx).Kind() == reflect.Pointer {
			l.mu.Lock()
			lk = l.runs[ctx]
			l.mu.Unlock()
		}
		if lk == nil {
			return fmt.Errorf("redlockgocron: Job: %w (is the job locked with this Locker, through gocron.WithDistributedLocker or WithDistributedJobLocker, and without an Elector?)", ErrNotLocked)
		}
		return runLeased(ctx, lk.lease, fmt.Sprintf("job %q", lk.key), fn)
	}
}

// Lock is the lock of one job run, returned by Locker.Lock; gocron calls its Unlock when
// the run ends.
type Lock struct {
	locker *Locker
	key    string
	lease  *redlock.Lease
	start  time.Time       // before the acquisition began
	ctx    context.Context // its key in locker.runs, or nil

	once sync.Once
}

var _ gocron.Lock = (*Lock)(nil)

// Lease returns the run's Lease: its Token fences the job's writes.
func (lk *Lock) Lease() *redlock.Lease { return lk.lease }

// Unlock releases the lock, or, with WithMinHold, arranges its release when the minimum
// hold has passed and returns nil at once. The release is attempted even if ctx has ended
// (gocron passes the job's context, which ends at shutdown). It returns an error matching
// ErrLockLost and the reason if the lock was lost before Unlock, the release's error
// (a *redlock.QuorumError if too few nodes answered: their copies expire by TTL), or one
// matching ErrNotLocked if called again.
func (lk *Lock) Unlock(ctx context.Context) error {
	err := fmt.Errorf("redlockgocron: unlock %q: %w", lk.key, ErrNotLocked)
	lk.once.Do(func() { err = lk.unlock(ctx) })
	return err
}

func (lk *Lock) unlock(ctx context.Context) error {
	l := lk.locker
	if ctx == nil {
		ctx = context.Background()
	}
	l.mu.Lock()
	if lk.ctx != nil && l.runs[lk.ctx] == lk {
		delete(l.runs, lk.ctx)
	}
	if reason := lk.lease.Err(); reason != nil {
		l.mu.Unlock()
		_ = lk.lease.Release(context.WithoutCancel(ctx)) // clears what is left of it
		return lostError(fmt.Sprintf("job %q", lk.key), reason)
	}
	if rest := l.minHold - time.Since(lk.start); rest > 0 && !l.closed {
		l.holding[lk] = time.AfterFunc(rest, func() {
			l.mu.Lock()
			_, ok := l.holding[lk]
			delete(l.holding, lk)
			l.mu.Unlock()
			if ok {
				_ = lk.lease.Release(context.Background())
			}
		})
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	return lk.lease.Release(context.WithoutCancel(ctx))
}

// watch reports the lease's end to the WithLockLostHandler function, unless it was
// released.
func (lk *Lock) watch() {
	<-lk.lease.Done()
	if reason := lk.lease.Err(); !errors.Is(reason, redlock.ErrReleased) {
		lk.locker.onLost(lk.key, lostError(fmt.Sprintf("job %q", lk.key), reason))
	}
}
