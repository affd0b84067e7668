package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"weak"

	"github.com/go-redlock/redlock/core"
)

// Client grants locks over a fixed set of nodes. Create it with New; a Client is safe for
// concurrent use by many goroutines and holds no connections of its own (the nodes' driver
// clients do). Close it when done. Every method of a nil *Client, or of a Client not made
// by New, panics with a message that says so.
type Client struct {
	cluster *core.Cluster
	nodes   []Node
	opts    settings

	// closing has room for one: the first Close takes it, and closes shut once closeErr is
	// set; a later Close waits for shut (a channel, not a sync.Once: a goroutine waiting
	// for a channel lets a testing/synctest bubble's clock move).
	closing  chan struct{}
	shut     chan struct{}
	closeErr error
	closed   chan struct{} // closed by Close: wakes the calls that wait in a local queue

	qmu    sync.Mutex
	queues map[string]weak.Pointer[queue] // per lock key: its local queue (see queueOf)

	hmu      sync.Mutex
	holdings map[*Lease]struct{} // the held locks, which Close releases; nil after Close
	// acquiring counts the acquisitions under way that began before Close (see begin); Add
	// happens under hmu while holdings is not nil, so every Add comes before Close's Wait.
	acquiring sync.WaitGroup
}

// New returns a Client over nodes, one per independent Redis master. A lock needs a quorum
// of N/2+1 of them. An odd N is the useful shape: an even N is allowed, but 4 nodes
// tolerate one failure, as 3 do, and New says so on the logger (see WithLogger).
//
// New fails with an error that matches ErrInvalid if nodes is empty, a node is nil, the
// same Node is given twice, or an option is out of range; the options become the Client's
// defaults for every call. Two different Nodes that reach the same server (two clients of
// one address, say) are found at their first acquisition, from the run_id the server
// reports, and from then on every acquisition fails with an error that matches ErrInvalid
// and names them: one server must never count as two votes. (A server that does not report
// a run_id, such as miniredis, cannot be checked; one whose user may not run INFO cannot
// either, and the logger says so, once per node.)
func New(nodes []Node, opts ...Option) (*Client, error) {
	s := defaults().with(opts)
	if !s.guardSet {
		s.guard = defaultGuard
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	cluster, err := core.NewCluster(nodes, notices(s.logger)...)
	if err != nil {
		return nil, err
	}
	if n := len(nodes); n%2 == 0 {
		noticeLogger(s.logger).Warn(fmt.Sprintf("redlock: an even number of nodes (%d) tolerates no more failed nodes than %d would, "+
			"with one more vote to wait for: an odd number is the useful shape", n, n-1), "nodes", n)
	}
	return &Client{cluster: cluster, nodes: append([]Node(nil), nodes...), opts: s, closed: make(chan struct{}),
		closing: make(chan struct{}, 1), shut: make(chan struct{}), holdings: make(map[*Lease]struct{})}, nil
}

// made panics, naming method, if c is nil or was not made by New: a bare nil dereference
// would not say which.
func (c *Client) made(method string) {
	switch {
	case c == nil:
		panic("redlock: " + method + " called on a nil *Client (create it with New)")
	case c.cluster == nil:
		panic("redlock: " + method + " called on a Client not made by New (create it with New)")
	}
}

// Close ends the Client. Every later acquisition through it (Acquire, TryAcquire, Do and
// their All forms, a Mutex's or an RWMutex's locking calls, a Semaphore's Acquire and TryAcquire, an
// Election's Campaign) fails with an error that matches ErrClosed, and so, at once, does
// every such call that is waiting: in Redis, or in the Client's local queue behind another
// goroutine of this Client. A Mutex.Lock or RWMutex.RLock panics instead, as it has no
// other way to say so; an Election's Observe channel closes.
//
// Close releases every lock the Client holds (each Lease, each holding of a Mutex or an
// RWMutex, a Semaphore's permits, an Election's leadership), and returns once they are
// released or their nodes timed out: nothing of the Client extends a lock after Close. Each
// holding ends with ErrClosed, as if it were lost: a Lease's Done channel closes and its
// Err is ErrClosed, a Mutex's or RWMutex's Lost channel closes, Do's function sees its
// context cancelled, and the WithLostHandler function is called with an error that matches
// ErrNotHeld and ErrClosed. A later Release, Unlock or RUnlock of such a holding lets it go
// locally and returns that error too (Unlock and RUnlock pass it to the WithErrorHandler
// function or the logger); Unlock still must be called only on a locked Mutex.
//
// Close waits for the acquisitions under way when it was called to return: one whose
// attempt, under way then, wins on the nodes lets go of the lock and fails with ErrClosed.
// It also waits for the calls that the Client's acquisitions and releases left under way
// when they returned: the queue leaves of waits that gave up while a call of theirs was
// under way, the releases of failed attempts on nodes that answered late, and a release's
// calls to nodes slower than a quorum (each within three node timeouts), so that a program
// that exits after Close leaves no waiter queued and no lock held on a node that answers.
//
// Last, Close closes the nodes' subscriptions: it calls Close on each node that has one (an
// io.Closer; the backends' Nodes close their pub/sub connections, never the driver client
// they were given), and returns their errors joined. Close is safe to call more than once
// and concurrently with every other call; later calls return the first one's error.
func (c *Client) Close() error {
	c.made("Close")
	select {
	case c.closing <- struct{}{}:
	default:
		<-c.shut
		return c.closeErr
	}
	defer close(c.shut)
	c.cluster.Close()
	close(c.closed)
	c.hmu.Lock()
	holdings := c.holdings
	c.holdings = nil
	c.hmu.Unlock()
	var wg sync.WaitGroup
	for l := range holdings {
		wg.Go(func() { _ = l.finish(context.Background(), ErrClosed) })
	}
	wg.Wait()
	c.acquiring.Wait() // they end with ErrClosed, having let go of what they took
	c.cluster.Wait()
	var errs []error
	for _, n := range c.nodes {
		if closer, ok := n.(io.Closer); ok {
			errs = append(errs, closer.Close())
		}
	}
	c.closeErr = errors.Join(errs...)
	return c.closeErr
}

// hold records l, which has just started, as a holding for Close to release. It reports
// false, recording nothing, if c is closed.
func (c *Client) hold(l *Lease) bool {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.holdings == nil {
		return false
	}
	c.holdings[l] = struct{}{}
	return true
}

// begin records an acquisition under way, which Close waits for: one whose attempt is under
// way at Close may win on the nodes after Close began, and then lets go of the lock (see
// Lease.start) before it returns. It reports whether it recorded it; the caller then calls
// end(true) once the acquisition has returned. An acquisition that begins after Close is
// not recorded: the nodes are not asked for it.
func (c *Client) begin() bool {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.holdings == nil {
		return false
	}
	c.acquiring.Add(1)
	return true
}

// end ends the acquisition that begin recorded, if it did.
func (c *Client) end(recorded bool) {
	if recorded {
		c.acquiring.Done()
	}
}

// drop forgets l, which has ended.
func (c *Client) drop(l *Lease) {
	c.hmu.Lock()
	delete(c.holdings, l)
	c.hmu.Unlock()
}

// Unguarded returns the nodes that cannot apply the restart guard because their servers
// are known to have no uptime to give (miniredis). They are found as locks are acquired with
// the guard on, so the list starts empty. Such a node's vote counts without the guard. (A
// server that refuses INFO is not listed: under the guard, it fails every acquisition.)
func (c *Client) Unguarded() []string {
	c.made("Unguarded")
	return c.cluster.Unguarded()
}

// TryAcquire makes one attempt to take the lock called name, and returns its Lease.
//
// Errors: ErrHeld if another owner holds it, including another goroutine of this Client
// (found without a round trip), or if waiters are queued for it (they go first); a
// *QuorumError (ErrNoQuorum) if too few nodes answered yes; ErrExpired if the nodes
// answered slower than the validity; ErrClosed after Close; ErrInvalid for a bad name or
// option; ctx's error (errors.Is(err, context.Canceled), say) if ctx ended. Every error
// names the lock.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	c.made("TryAcquire")
	l, err := c.newLease("TryAcquire", one(name), optRetry|optLogger|optErrorHandler, opts)
	if err != nil {
		return nil, err
	}
	return c.acquireLease(ctx, l, false)
}

// Acquire takes the lock called name, waiting while another owner holds it and retrying
// through node failures, until it succeeds or ctx ends. It returns the Lease. Goroutines of
// one Client that wait for one name (through Acquire, Do or a Mutex) queue locally in FIFO
// order, and only the first of them waits in Redis, where the waiters of all processes take
// turns in the order they started waiting (see core.Cluster.AcquireWait).
//
// When ctx ends first, the error matches ctx's error (context.DeadlineExceeded, say) and the
// last attempt's error (ErrHeld, ErrNoQuorum...) under errors.Is. An error that no retry
// can fix ends it at once (see core.Permanent): ErrInvalid for a bad name or option, or two
// nodes that reach one server; ErrClosed after Close; a *QuorumError in which too many
// nodes fail for good (a script error, CROSSSLOT, a closed driver client...). Every error
// names the lock, and a node's error names the node. With WithLogger, a wait that keeps
// failing for other reasons than a holder is logged (see WithLogger).
func (c *Client) Acquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	c.made("Acquire")
	l, err := c.newLease("Acquire", one(name), optErrorHandler, opts)
	if err != nil {
		return nil, err
	}
	return c.acquireLease(ctx, l, true)
}

// acquireLease takes l, a Lease not yet held: if wait, waiting as Acquire does, else in
// one attempt (see acquire). Once held, l keeps the lock's place in the local queue until
// it ends. A lock over several names has no local queue (see localQueue).
func (c *Client) acquireLease(ctx context.Context, l *Lease, wait bool) (*Lease, error) {
	defer c.end(c.begin())
	q := c.localQueue(l.lock.Keys)
	g, err := c.acquire(ctx, "acquire", l, q, wait)
	if err != nil {
		return nil, err
	}
	if q != nil {
		l.leaveQueue = q.leave
	}
	if err := l.start(g); err != nil { // it gave back the place
		return nil, err
	}
	return l, nil
}

// Do acquires the lock called name (waiting, as Acquire does), runs fn while holding it, and
// releases it, also when fn panics (the panic then goes on). The Lease extends itself
// while fn runs, and fn's context is cancelled, with the lease's error as its cause, when
// the lease ends: fn should then stop touching the shared resource.
//
// When fn's context is cancelled: never later than the lease's Until (the end of the
// validity it was granted, or that its last extension gave it), so while fn's context is
// live the lock is valid; and if the nodes lose the lock earlier (their keys deleted or
// lost behind its back), at the next extension, which comes when a third of the validity
// (TTL minus the drift allowance) is left: at most two thirds of the validity, and the
// extension's round trip, after the loss.
//
// Do returns Acquire's error if the lock was never held; otherwise fn's error; if the lease
// ended while fn ran, an error that matches ErrNotHeld and the reason (ErrLost, say), joined
// with fn's (fn's alone if it wraps that error, as context.Cause(ctx) is); or else Release's
// error. WithErrorHandler and WithAutoExtend(false) do not
// apply to Do (an error that matches ErrInvalid).
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	c.made("Do")
	return c.do(ctx, "Do", one(name), fn, opts)
}

// do is Do and DoAll, call, over t.
func (c *Client) do(ctx context.Context, call string, t target, fn func(ctx context.Context) error, opts []Option) error {
	if fn == nil {
		return &lockError{call, t.name, fmt.Errorf("%w: nil function", ErrInvalid)}
	}
	l, err := c.newLease(call, t, optErrorHandler|optNoAutoExtend, opts)
	if err != nil {
		return err
	}
	l.opts.autoExtend = true
	if _, err := c.acquireLease(ctx, l, true); err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.Done():
			cancel(l.notHeld(l.reason()))
		case <-fctx.Done():
		}
	}()
	returned := false
	defer func() {
		if !returned { // fn panicked (or called runtime.Goexit): let go of the lock first
			cancel(nil)
			_ = l.Release(context.WithoutCancel(ctx))
		}
	}()
	ferr := fn(fctx)
	returned = true
	ended := l.reason()
	cancel(nil)
	rerr := l.Release(context.WithoutCancel(ctx))
	switch {
	case ended != nil && errors.Is(ferr, l.notHeld(ended)): // fn returned its context's cause, or wrapped it
		return ferr
	case ended != nil:
		return errors.Join(l.notHeld(ended), ferr)
	case ferr != nil:
		return ferr
	}
	return rerr
}

// newLease returns a Lease, not yet held, of t's lock, for call with opts, of which those
// among not (optRetry...) do not apply, nor WithFencing (a Lease always carries a token).
func (c *Client) newLease(call string, t target, not uint32, opts []Option) (*Lease, error) {
	if err := t.check(); err != nil {
		return nil, &lockError{call, t.name, err}
	}
	s, err := c.opts.forCall(call, not|optFencing, opts)
	if err != nil {
		return nil, &lockError{call, t.name, err}
	}
	keys := t.keys(s.prefix)
	l := c.leaseOf(t.name, KindLease, keys, s)
	l.groups = c.slotGroups(keys, t.name, s.prefix)
	l.movable = true
	return l, nil
}

// leaseOf returns a Lease, not yet held, of one holding of kind of the lock whose keys are
// keys, with settings s (checked), named name in its errors and events: the lock called
// name, or one that a primitive called name keeps for itself (see core.NewSemaphoreKeys). A
// Lease and an RWMutex's writer take a fencing token, a Mutex only WithFencing(true), a
// reader never.
func (c *Client) leaseOf(name string, kind Kind, keys core.Keys, s settings) *Lease {
	l := &Lease{
		client:  c,
		cluster: c.cluster,
		name:    name,
		kind:    kind,
		opts:    s,
		lock: core.Lock{
			Keys:        keys,
			TTL:         s.ttl,
			NodeTimeout: s.nodeTimeout,
			DriftFactor: s.driftFactor,
			Read:        kind == KindRWMutexRead,
			Fence:       kind == KindLease || kind == KindRWMutexWrite || kind == KindMutex && s.fencing,
			Guard:       s.guard,
			Description: s.description,
		},
	}
	if s.observer != nil { // its failed node calls go to the Observer
		l.lock.NodeFailed = l.nodeFailed
	}
	return l
}
