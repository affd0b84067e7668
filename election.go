package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redlock/redlock/core"
)

// ErrNoLeader means an election has no leader: no candidate holds its lock on a quorum of
// nodes with a value it proclaimed.
var ErrNoLeader = errors.New("redlock: election has no leader")

// Election elects one leader at a time among the candidates, in every process, that use
// the same name over the same nodes, and lets anyone read the leader's value. Create it
// with Client.NewElection; the zero Election is not usable. One Election is safe for use
// by many goroutines.
//
// Leadership is the lock called name: Campaign waits for it as Client.Acquire does (the
// candidates take turns in the order they began), and the leader's Lease extends itself
// and fences the leader's writes with its token. The leader's value is recorded on the
// nodes where it holds the lock (the key "<prefix>{<name>}:leader"), again after each
// extension and after a record that missed a node, so that it stands wherever the lock
// does; Leader returns it only while its holder holds the lock on a quorum.
type Election struct {
	client *Client
	name   string
	set    settings
	keys   core.Keys
	err    error
}

// NewElection returns the Election called name. Options apply to the leader's Lease (TTL,
// node timeout, restart guard, maximum hold time, lost handler...), which always extends
// itself, and WithRetry and WithLogger to Campaign's wait (as to Client.Acquire's).
// WithAutoExtend(false) and WithErrorHandler do not apply (the leader's Lease always
// extends itself; Campaign returns its errors). A bad name or option (those two among
// them) is reported by Campaign, Leader and Observe's channel (closed at once), as an
// error that matches ErrInvalid and names the Election.
func (c *Client) NewElection(name string, opts ...Option) *Election {
	c.made("NewElection")
	e := &Election{client: c, name: name}
	var err error
	e.set, err = c.opts.forCall("NewElection", optNoAutoExtend|optErrorHandler|optFencing, opts)
	e.set.autoExtend = true
	if err == nil {
		err = checkName(name)
	}
	if err != nil {
		e.err = &lockError{"NewElection", name, err}
	}
	e.keys = core.NewKeys(e.set.prefix, name)
	return e
}

// Campaign waits until this candidate leads, or ctx ends, and records value as the leader's
// (at most core.MaxValueLen bytes). It returns the leader's Lease: its Token fences the
// leader's writes, Done and Err say when leadership is lost, and Release resigns. The
// lease extends itself while held.
//
// Errors: those of Client.Acquire; one that matches ErrInvalid for a value that is too
// long. Once it leads, Campaign records the value on a quorum, trying again (as Acquire
// does) while the failures are ones a retry can fix. A lease that ends before its record
// stands never led: the candidate campaigns again. If ctx ends first, or a failure is one
// no retry can fix, the candidate resigns and Campaign returns an error that matches that
// end (ctx's error, say) and the last failure.
func (e *Election) Campaign(ctx context.Context, value string) (*Lease, error) {
	if err := e.usable("campaign"); err != nil {
		return nil, err
	}
	if len(value) > core.MaxValueLen {
		return nil, &lockError{"campaign", e.name, fmt.Errorf("%w: a value of %d bytes: at most %d", ErrInvalid, len(value), core.MaxValueLen)}
	}
	for {
		l := e.client.leaseOf(e.name, KindLease, e.keys, e.set)
		l.extensions = make(chan struct{}, 1)
		l.record = &leaderRecord{value: value}
		l, err := e.client.acquireLease(ctx, l, true)
		if err != nil {
			return nil, err
		}
		err = e.proclaim(ctx, l, value)
		if err == nil {
			go e.keepRecord(l)
			return l, nil
		}
		_ = l.Release(context.WithoutCancel(ctx))
		if !errors.Is(err, ErrNotHeld) || ctx.Err() != nil {
			return nil, &lockError{"campaign", e.name, err}
		}
	}
}

// leaderRecord is a leader's value, and the lock that keeps the writes of its record in
// order: Proclaim's of a new value, and keepRecord's of the one it finds.
type leaderRecord struct {
	mu    sync.Mutex // held while the record is written
	value string
}

// Proclaim makes value the value of leader, the Lease that Campaign returned, without a new
// election (etcd's Proclaim): the record on the nodes, which Leader returns and Observe
// sends, changes to value; the token stays. It records value on a quorum, trying again as
// Campaign does, and the leader records it again after each extension: the last value
// proclaimed, also by a call that failed when ctx ended (it may stand on some nodes
// already), so that the record converges to it while the leader leads. Proclaim calls on
// one leader run one at a time.
//
// Errors: one that matches ErrInvalid for a value over core.MaxValueLen bytes or a leader
// that is not this Election's; one that matches ErrNotHeld if leadership was lost (or
// resigned); ctx's error (and the last failure's) if ctx ends first.
func (e *Election) Proclaim(ctx context.Context, leader *Lease, value string) error {
	if err := e.usable("proclaim"); err != nil {
		return err
	}
	switch {
	case leader == nil || leader.record == nil || leader.cluster != e.client.cluster || leader.lock.Keys.Lock != e.keys.Lock:
		return &lockError{"proclaim", e.name, fmt.Errorf("%w: not a leader of this Election (use the Lease that Campaign returned)", ErrInvalid)}
	case len(value) > core.MaxValueLen:
		return &lockError{"proclaim", e.name, fmt.Errorf("%w: a value of %d bytes: at most %d", ErrInvalid, len(value), core.MaxValueLen)}
	}
	if reason := leader.reason(); reason != nil {
		return leader.notHeld(reason)
	}
	r := leader.record
	r.mu.Lock()
	defer r.mu.Unlock()
	r.value = value
	if err := e.proclaim(ctx, leader, value); err != nil {
		return &lockError{"proclaim", e.name, err}
	}
	return nil
}

// proclaim records value as the value of l's holder, trying again after a failure that a
// retry can fix (backing off as Acquire does) until it succeeds, l ends, or ctx ends (the
// error then matches ctx's error and the last failure's).
func (e *Election) proclaim(ctx context.Context, l *Lease, value string) error {
	b := core.Backoff{Min: e.set.retryMin, Max: e.set.retryMax}
	for attempt := 1; ; attempt++ {
		err := e.client.cluster.Proclaim(ctx, l.held, value)
		if err == nil || errors.Is(err, ErrNotHeld) || core.Permanent(err) {
			return err
		}
		t := time.NewTimer(b.Delay(attempt, 0))
		select {
		case <-t.C:
		case <-l.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", l.reason(), err)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
	}
}

// keepRecord records l's value (l.record) again while l leads, so that the record stands on every node
// where the lock does: at once (Campaign's record returned at a quorum, maybe before a node
// that missed it answered), and after each extension of l (a node the extension took, a
// record's time). It hears every node out, and after a record that missed a node (a
// failure, a timeout) it tries again, backing off as Acquire does, up to a third of the
// lease's validity.
func (e *Election) keepRecord(l *Lease) {
	b := core.Backoff{Min: e.set.retryMin, Max: max(e.set.retryMin, (l.lock.TTL-l.lock.Drift())/3)}
	again := time.NewTimer(0)
	defer again.Stop()
	for attempt := 0; ; {
		again.Stop()
		l.record.mu.Lock()
		missed, err := e.client.cluster.ProclaimEverywhere(context.Background(), l.held, l.record.value)
		l.record.mu.Unlock()
		if missed > 0 && !core.Permanent(err) {
			again.Reset(b.Delay(attempt, 0))
			attempt++
		} else {
			attempt = 0
		}
		select {
		case <-l.Done():
			return
		case <-l.extensions:
		case <-again.C:
		}
	}
}

// Leader returns the current leader's value. Errors: one that matches ErrNoLeader when
// there is none (or it has not recorded its value yet); a *QuorumError when too few nodes
// answered to tell; ctx's error.
func (e *Election) Leader(ctx context.Context) (string, error) {
	if err := e.usable("leader"); err != nil {
		return "", err
	}
	_, value, err := e.leader(ctx)
	return value, err
}

// leader returns the current leader's token and value, with Leader's errors but for a bad
// name or option.
func (e *Election) leader(ctx context.Context) (token, value string, err error) {
	token, value, ok, err := e.client.cluster.Leader(ctx, e.keys, e.set.nodeTimeout)
	switch {
	case err != nil:
		return "", "", err // core's errors name the election
	case !ok:
		return "", "", &lockError{"leader", e.name, ErrNoLeader}
	}
	return token, value, nil
}

// Observe returns a channel on which it sends the leader's value each time the leader
// changes (a new leader's value also when it is the last one's) or proclaims a new value
// (Proclaim), starting with the current
// one ("" if none), and "" when the election is left without a leader; it is closed when
// ctx ends, the Client is closed, or reading the leader fails with an error no retry can
// fix (see core.Permanent: the nodes' driver clients were closed, say). It learns of a new
// leader when the leader records its value (through the nodes that offer notifications),
// and checks every refresh interval (see Mutex) besides, which is how it learns that a
// leader is gone. A leader that comes and goes within one check may be missed where the
// nodes offer no notifications. The channel is unbuffered: a receiver that falls behind
// delays the next check, and then sees the leader as it is then.
func (e *Election) Observe(ctx context.Context) <-chan string {
	out := make(chan string)
	if e.usable("observe") != nil {
		close(out)
		return out
	}
	wake, stop := e.client.cluster.WatchLeader(ctx, e.keys, e.set.nodeTimeout)
	go func() {
		defer close(out)
		defer stop()
		e.observe(ctx, out, wake)
	}()
	return out
}

// observe reads the leader when wake is ready and at least every refresh interval, and
// sends it to out whenever it changed, until ctx ends, the Client is closed, or a read
// fails for good.
func (e *Election) observe(ctx context.Context, out chan<- string, wake <-chan struct{}) {
	tick := time.NewTicker(max(50*time.Millisecond, e.set.nodeTimeout*5/2))
	defer tick.Stop()
	var last sent
	for {
		token, value, err := e.leader(ctx)
		if ctx.Err() != nil || core.Permanent(err) {
			return
		}
		if (err == nil || errors.Is(err, ErrNoLeader)) && last.news(token, value) {
			select {
			case out <- value:
			case <-ctx.Done():
				return
			case <-e.client.closed:
				return
			}
			last = sent{token, value, true}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.client.closed:
			return
		case <-wake:
		case <-tick.C:
		}
	}
}

// sent is the leader that Observe sent last, by its token ("" for none), and its value: a
// new leader is news even if its value is the last one's, and so is a leader's new value
// (Proclaim).
type sent struct {
	token, value string
	any          bool // something was sent
}

// news reports whether the leader token, with value, is to be sent after s.
func (s sent) news(token, value string) bool {
	return !s.any || token != s.token || value != s.value
}

// usable returns the error that Campaign, Leader and Observe (op) report for a bad name or
// option, or a zero Election.
func (e *Election) usable(op string) error {
	if e.client == nil {
		return &lockError{op, e.name, fmt.Errorf("%w: zero Election (use Client.NewElection)", ErrInvalid)}
	}
	return e.err
}
