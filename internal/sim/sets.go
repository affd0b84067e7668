package sim

import (
	"context"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
)

// The sets workload: locks over several names at once (core.NewSetKeys, through core), for
// writers and for readers, mixed with single-name holders of the same names (fenced Leases,
// unfenced Mutexes and RWMutex readers: with the restart guard on, as in every run, a
// Mutex's attempts run the acquire script too, so its plain SET NX, which does not look at
// the queue, is not exercised). Four clients (clientsOf); at each acquisition an actor
// draws what it takes:
//
//   - half the time a set, one of setNames: a third of those as a reader (Read), the others
//     as a fenced writer (in a run without crashes, two of the four sets unfenced and
//     without the restart guard), over core.Cluster: AcquireWait (with no deadline when the
//     wait keeps asking), or one attempt (Acquire); extended by hand (core.Cluster.Extend),
//     at every step half the time (so that extensions meet the faults), released with
//     core.Cluster.Release;
//   - else one name of universe, as a Lease, a Mutex or an RWMutex's reader (a sixth each),
//     as the lease, mutex and rwmutex workloads take theirs.
//
// A set's holding is recorded with its names, and holds each of them for its validity under
// its one token (a reader's: none): the checker's exclusion and fencing hold per name (see
// exclusion and fencing), readers sharing. The idle bound counts a waiter as idle only while
// no name is held at all: a waiter may rightly wait for a free name kept for a set waiter
// ahead of it that waits for another name.

// universe are the names of the sets workload.
var universe = []string{"x", "y", "z"}

// setNames are the sets of names that its actors take (each sorted).
var setNames = [][]string{{"x", "y"}, {"y", "z"}, {"x", "z"}, {"x", "y", "z"}}

// setsAcquirer returns actor a's acquisition for the sets workload, over its Client c for
// single names and its core.Cluster cl (over the same nodes) for sets.
func setsAcquirer(a *actor, c *redlock.Client, cl *core.Cluster) func(ctx context.Context, keeps bool) (*held, error) {
	type acquisition = func(ctx context.Context, keeps bool) (*held, error)
	mutexes, leases, readers := map[string]acquisition{}, map[string]acquisition{}, map[string]acquisition{}
	for _, name := range universe {
		mutexes[name] = mutexAcquirer(a, c.NewMutex(name))
		leases[name] = leaseAcquirer(a, c, name, false)
		readers[name] = readerAcquirer(a, c.NewRWMutex(name))
	}
	locks, reads := make([]*core.Lock, len(setNames)), make([]*core.Lock, len(setNames))
	for i, names := range setNames {
		keys, err := core.NewSetKeys("redlock:", names) // the library's default prefix, as the Client's
		if err != nil {
			panic(err) // the names are the simulation's own
		}
		locks[i] = &core.Lock{Keys: keys, TTL: a.env.ttl, NodeTimeout: nodeTimeout, DriftFactor: 0.01, Fence: true, Guard: a.env.guard}
		if i%2 == 1 && len(a.env.plan.crashes) == 0 { // no restart to guard against: the scripts' unguarded, unfenced case too
			locks[i].Fence, locks[i].Guard = false, 0
		}
		r := *locks[i]
		r.Read, r.Fence = true, false
		reads[i] = &r
	}
	return func(ctx context.Context, keeps bool) (*held, error) {
		name := universe[a.rng.IntN(len(universe))]
		var acquire acquisition
		switch a.rng.IntN(6) {
		case 0, 1:
			i := a.rng.IntN(len(locks))
			return acquireSet(ctx, a, cl, locks[i], setNames[i], keeps)
		case 2:
			i := a.rng.IntN(len(reads))
			return acquireSet(ctx, a, cl, reads[i], setNames[i], keeps)
		case 3:
			acquire = leases[name]
		case 4:
			acquire = mutexes[name]
		default:
			acquire = readers[name]
		}
		h, err := acquire(ctx, keeps)
		if err != nil {
			return nil, err
		}
		h.h.names = []string{name}
		return h, nil
	}
}

// setBackoff is the backoff of a set's AcquireWait: the library's default.
var setBackoff = core.Backoff{Min: 10 * time.Millisecond, Max: 250 * time.Millisecond}

// acquireSet takes the set of names that l asks for on cl: in one attempt (Acquire) half the
// time when the wait does not keep asking, else by AcquireWait until ctx ends.
func acquireSet(ctx context.Context, a *actor, cl *core.Cluster, l *core.Lock, names []string, keeps bool) (*held, error) {
	var h *core.Held
	var err error
	if !keeps && a.rng.IntN(2) == 0 {
		h, err = cl.Acquire(ctx, l)
	} else {
		h, err = cl.AcquireWait(ctx, l, setBackoff)
	}
	if err != nil {
		return nil, err
	}
	s := &setLease{cl: cl, h: h, until: h.Until, lost: make(chan struct{})}
	s.expiry = time.AfterFunc(time.Until(h.Until), s.lose)
	role := writer
	if l.Read {
		role = reader
	}
	return &held{
		h:       holding{client: a.id, role: role, token: h.Fence, fenced: l.Fence, names: names},
		until:   s.Until,
		lost:    s.lost,
		extend:  s.extend,
		eager:   a.rng.IntN(2) == 0,
		release: s.release,
	}, nil
}

// setLease is a set held through core, as the actor sees it: the end of its validity, which
// each extension moves, and a channel closed once that end passed (core says no more: a
// set's holder that died, or whose extensions failed, loses it at the end of its validity).
// Extend and release run in the actor's goroutine, Until in its watcher's too.
type setLease struct {
	cl *core.Cluster
	h  *core.Held

	mu     sync.Mutex
	until  time.Time
	expiry *time.Timer // closes lost at until
	lost   chan struct{}
	once   sync.Once
}

// Until returns the end of the set's validity.
func (s *setLease) Until() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until
}

func (s *setLease) lose() { s.once.Do(func() { close(s.lost) }) }

// extend extends the set on a quorum and moves the end of its validity (see
// core.Cluster.Extend); a failed extension leaves it where it was.
func (s *setLease) extend(ctx context.Context) error {
	until, err := s.cl.Extend(ctx, s.h)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if until.After(s.until) {
		s.until = until
		s.expiry.Reset(time.Until(until))
	}
	return nil
}

// release lets go of the set (see core.Cluster.Release).
func (s *setLease) release(ctx context.Context) error {
	s.expiry.Stop()
	return s.cl.Release(ctx, s.h)
}
