package redlockgocron

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-redlock/redlock"
)

// Elector is a gocron.Elector over a redlock.Election: give it to
// gocron.WithDistributedElector in every process, with the same election name, and only
// the scheduler whose candidate leads runs jobs. Create it with NewElector, and Close it
// to resign. It is safe for concurrent use.
//
// From NewElector until Close (or the end of NewElector's context), a goroutine campaigns
// for leadership: it waits its turn in the election (redlock.Election.Campaign: candidates
// take turns in the order they began), leads until its lease ends (lost, or its validity
// ran out), and then campaigns again. gocron calls IsLeader before each run and skips the
// run when it returns an error; when a scheduler has an Elector, gocron calls no Locker.
//
// gocron does not let an elector stop a running job: wrap job functions with Job for their
// context to end when leadership does.
type Elector struct {
	election     *redlock.Election
	electionOpts []redlock.Option // until NewElection
	name         string
	value        string
	retry        time.Duration
	onLost       func(err error)

	cancel    context.CancelFunc
	done      chan struct{} // closed when the campaign goroutine has returned
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	lease   *redlock.Lease // while leading
	lastErr error          // the last campaign's error, nil once it led
	stopped error          // why campaigning stopped for good: ErrClosed, ctx's error...
}

var _ gocron.Elector = (*Elector)(nil)

// ElectorOption configures an Elector (see NewElector).
type ElectorOption func(*Elector) error

// WithElectionOptions sets the redlock options of the election (given to
// redlock.Client.NewElection): redlock.WithTTL, redlock.WithNodeTimeout... The leader's
// lease always extends itself.
func WithElectionOptions(opts ...redlock.Option) ElectorOption {
	return func(e *Elector) error {
		e.electionOpts = append(e.electionOpts, opts...)
		return nil
	}
}

// WithCampaignRetry sets how long the Elector waits before campaigning again after a
// campaign failed (one that could not record its value on a quorum, say; Campaign itself
// waits through other candidates and node failures). Default 1s; it must be positive.
func WithCampaignRetry(d time.Duration) ElectorOption {
	return func(e *Elector) error {
		if d <= 0 {
			return fmt.Errorf("redlockgocron: WithCampaignRetry(%v): not positive", d)
		}
		e.retry = d
		return nil
	}
}

// WithLeadershipLostHandler sets a function called, in the campaign goroutine, when
// leadership ends otherwise than by Close or the end of NewElector's context: err matches
// ErrLockLost and the lease's reason (redlock.ErrLost, redlock.ErrExpired...). The Elector
// campaigns again when it returns, so it must not block for long. Default none.
func WithLeadershipLostHandler(f func(err error)) ElectorOption {
	return func(e *Elector) error {
		e.onLost = f
		return nil
	}
}

// NewElector starts campaigning, in the background, for the leadership of the election
// called name over client, with value as this candidate's value (what Leader returns in
// every process while it leads: a host name, say). It returns at once: IsLeader returns an
// error until the candidate leads. Campaigning goes on until Close, or until ctx ends,
// which resigns as Close does.
//
// It fails if ctx or client is nil, name or value is empty, or an option is invalid (a nil
// option is ignored); other errors (a name or value that redlock refuses, a closed Client)
// stop the campaign and come with IsLeader's error.
func NewElector(ctx context.Context, client *redlock.Client, name, value string, opts ...ElectorOption) (*Elector, error) {
	switch {
	case ctx == nil:
		return nil, errors.New("redlockgocron: NewElector: nil context")
	case client == nil:
		return nil, errors.New("redlockgocron: NewElector: nil client")
	case name == "":
		return nil, errors.New("redlockgocron: NewElector: empty election name")
	case value == "":
		return nil, errors.New("redlockgocron: NewElector: empty value")
	}
	e := &Elector{name: name, value: value, retry: time.Second, done: make(chan struct{})}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(e); err != nil {
			return nil, err
		}
	}
	e.election = client.NewElection(name, e.electionOpts...)
	e.electionOpts = nil
	ctx, e.cancel = context.WithCancel(ctx)
	go e.campaign(ctx)
	return e, nil
}

// campaign leads whenever it can until ctx ends, and then resigns.
func (e *Elector) campaign(ctx context.Context) {
	defer close(e.done)
	for {
		lease, err := e.election.Campaign(ctx, e.value)
		if err != nil {
			if ctx.Err() != nil {
				e.stop(ctx)
				return
			}
			e.mu.Lock()
			e.lastErr = err
			e.mu.Unlock()
			if errors.Is(err, redlock.ErrInvalid) || errors.Is(err, redlock.ErrClosed) {
				e.stop(ctx) // no retry can fix it
				return
			}
			select {
			case <-time.After(e.retry):
				continue
			case <-ctx.Done():
				e.stop(ctx)
				return
			}
		}
		e.mu.Lock()
		e.lease, e.lastErr = lease, nil
		e.mu.Unlock()
		select {
		case <-lease.Done():
			e.mu.Lock()
			e.lease = nil
			e.mu.Unlock()
			if e.onLost != nil {
				e.onLost(lostError(fmt.Sprintf("election %q", e.name), lease.Err()))
			}
		case <-ctx.Done():
			e.mu.Lock()
			e.lease = nil // IsLeader says no before the release lets another lead
			e.mu.Unlock()
			err := lease.Release(context.Background())
			if errors.Is(err, redlock.ErrNotHeld) && !errors.Is(err, redlock.ErrReleased) {
				err = nil // it was lost as it resigned: nothing left to say
			}
			e.closeErr = err
			e.stop(ctx)
			return
		}
	}
}

// stop records why campaigning stopped for good.
func (e *Elector) stop(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped == nil {
		if ctx.Err() != nil && context.Cause(ctx) != context.Canceled {
			e.stopped = context.Cause(ctx)
		} else {
			e.stopped = ErrClosed
		}
	}
}

// IsLeader returns nil while this Elector's candidate leads: it holds the election's lock
// and its validity has not run out. Otherwise it returns an error matching ErrNotLeader,
// joined with the last campaign's error if it failed, or with ErrClosed (or the context's
// error) once the Elector stopped. gocron calls it before each run; it makes no round trip.
func (e *Elector) IsLeader(context.Context) error {
	e.mu.Lock()
	lease, lastErr, stopped := e.lease, e.lastErr, e.stopped
	e.mu.Unlock()
	if lease != nil && lease.Err() == nil && time.Now().Before(lease.Until()) {
		return nil
	}
	if stopped != nil && lastErr == nil {
		lastErr = stopped
	}
	if lastErr != nil {
		return fmt.Errorf("%w (election %q): %w", ErrNotLeader, e.name, lastErr)
	}
	return fmt.Errorf("%w (election %q)", ErrNotLeader, e.name)
}

// Lease returns the leader's Lease while this candidate leads, or nil: its Token fences
// the leader's writes.
func (e *Elector) Lease() *redlock.Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil || e.lease.Err() != nil {
		return nil
	}
	return e.lease
}

// Leader returns the current leader's value, this candidate's or another's, as
// redlock.Election.Leader does: an error matching redlock.ErrNoLeader if there is none.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	return e.election.Leader(ctx)
}

// Close stops campaigning and resigns: IsLeader returns an error from then on, and the
// lease is released, so that the next candidate leads at once. It waits for the campaign
// goroutine to return, and returns the release's error (nil if it did not lead); later
// calls return the same.
func (e *Elector) Close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		<-e.done
	})
	return e.closeErr
}

// Job wraps a job function so that it runs only while this Elector's candidate leads, and
// its context ends when leadership does: the context is cancelled, with a cause matching
// ErrLockLost and the lease's reason, when the lease is lost or the Elector resigns
// (redlock.ErrReleased). LeaseFromContext returns the leader's lease from it.
//
// The wrapper returns fn's error, joined with that cause if leadership ended while fn ran.
// It does not call fn, and returns an error matching ErrNotLeader, if the candidate does
// not lead when the run starts (leadership may end between gocron's IsLeader and the run).
func (e *Elector) Job(fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		lease := e.Lease()
		if lease == nil {
			if err := e.IsLeader(ctx); err != nil {
				return err
			}
			return fmt.Errorf("%w (election %q)", ErrNotLeader, e.name) // it led from just then
		}
		return runLeased(ctx, lease, fmt.Sprintf("election %q", e.name), fn)
	}
}
