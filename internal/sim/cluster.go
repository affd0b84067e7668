package sim

import (
	"context"
	"fmt"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/internal/redistest"
)

// The cluster-shaped workloads: every Node is a Redis Cluster client (core.ShardedPubSub
// reports true), as the go-redis backend over a *redis.ClusterClient is, so the library
// takes a lock over names in several slots slot by slot (slots.go), and publishes its
// hand-overs with SPUBLISH. Each server stands for one cluster: it keeps every slot, and
// models the two rules a real cluster adds (see node.Eval, node.Subscribe and the
// server's SPUBLISH):
//
//   - a script's keys must all fall in one slot: a script sent over several is a violation
//     (and fails with CROSSSLOT, as a cluster answers);
//   - a subscription is a shard channel's (SSUBSCRIBE): it hears SPUBLISH only, and a PUBLISH
//     on the node reaches no waiter, whose wait then lasts until its next attempt (the idle
//     check sees it).
//
// cluster: as sets, every name of setNames over the root API (AcquireAll, TryAcquireAll,
// NewMutexAll, NewRWMutexAll's readers), mixed with single-name Mutexes, Leases and
// readers; csemaphore: the semaphore workload over such nodes.
//
// They catch a composite grant returned past a part's validity, and a Semaphore's release
// that publishes with PUBLISH where the node asks for SPUBLISH.
const (
	wCluster    = "cluster"
	wCSemaphore = "csemaphore"
)

// ExtraWorkloads returns the workloads that run only when asked for (-workload, or -extra,
// which adds them to the cycle): none now; the cluster-shaped ones and the crowd of lapsed
// waiters (crowd.go) joined the default set once the library kept their rules.
func ExtraWorkloads() []string { return nil }

// sharded reports whether workload w runs over cluster-shaped nodes.
func sharded(w string) bool { return w == wCluster || w == wCSemaphore }

// shardChannel is the channel under which a cluster-shaped server keeps a shard channel's
// subscribers, apart from PUBLISH's.
func shardChannel(channel string) string { return "sharded:" + channel }

// crossSlot returns an error, and reports a violation, if keys fall in several slots.
func (n *node) crossSlot(script string, keys []string) error {
	for _, k := range keys[min(1, len(keys)):] {
		if redistest.KeySlot(k) != redistest.KeySlot(keys[0]) {
			n.link.report("c%d sent %s to %s over keys in several slots (%s, %s)", n.link.client, script, n.link.srv.name, keys[0], k)
			return fmt.Errorf("CROSSSLOT Keys in request don't hash to the same slot")
		}
	}
	return nil
}

// clusterAcquirer returns actor a's acquisition for the cluster workload, over its Client c.
func clusterAcquirer(a *actor, c *redlock.Client) func(ctx context.Context, keeps bool) (*held, error) {
	type acquisition = func(ctx context.Context, keeps bool) (*held, error)
	singles := map[string][]acquisition{}
	for _, name := range universe {
		singles[name] = []acquisition{mutexAcquirer(a, c.NewMutex(name)), leaseAcquirer(a, c, name, false), readerAcquirer(a, c.NewRWMutex(name))}
	}
	mutexes, readers := make([]acquisition, len(setNames)), make([]acquisition, len(setNames))
	for i, names := range setNames {
		mutexes[i] = mutexAcquirer(a, c.NewMutexAll(names))
		readers[i] = readerAcquirer(a, c.NewRWMutexAll(names))
	}
	return func(ctx context.Context, keeps bool) (*held, error) {
		i := a.rng.IntN(len(setNames))
		names := setNames[i]
		var acquire acquisition
		switch a.rng.IntN(6) {
		case 0, 1:
			acquire = func(ctx context.Context, keeps bool) (*held, error) { return acquireAll(ctx, a, c, names, keeps) }
		case 2:
			acquire = mutexes[i]
		case 3:
			acquire = readers[i]
		default:
			name := universe[a.rng.IntN(len(universe))]
			names = []string{name}
			acquire = singles[name][a.rng.IntN(3)]
		}
		h, err := acquire(ctx, keeps)
		if err != nil {
			return nil, err
		}
		h.h.names = names
		return h, nil
	}
}

// acquireAll takes names as one fenced Lease (AcquireAll, or TryAcquireAll half the time
// when the wait does not keep asking), extending itself half the time.
func acquireAll(ctx context.Context, a *actor, c *redlock.Client, names []string, keeps bool) (*held, error) {
	auto := a.rng.IntN(2) == 0
	var l *redlock.Lease
	var err error
	if !keeps && a.rng.IntN(2) == 0 {
		l, err = c.TryAcquireAll(ctx, names, redlock.WithAutoExtend(auto))
	} else {
		l, err = c.AcquireAll(ctx, names, redlock.WithAutoExtend(auto))
	}
	if err != nil {
		return nil, err
	}
	h := leaseHeld(a.id, writer, l)
	if !auto {
		h.extend = l.Extend
	}
	return h, nil
}

// describe names the cluster-shaped nodes in a run's first line.
func describe(w string) string {
	if sharded(w) {
		return ", cluster-shaped nodes (slot by slot, SPUBLISH)"
	}
	return ""
}
