package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// env is what a run's actors share.
type env struct {
	plan *plan
	rec  *recorder
	timing
	// spaced: half the gaps between an actor's holdings last up to 3 TTLs, not 50 ms (the hold
	// workload: a release must often find no waiter, which would take the key it frees)
	spaced  bool
	fifo    bool // the waits are checked for their order (see fifo)
	sharded bool // the nodes are cluster-shaped (see cluster.go)
	// crowd: more lapsed waiters than a script forgets at once head the queue (see
	// crowd.go), so a call may read as one behind a live waiter: idle waits longer
	crowd   bool
	leaders bool // Election: the observer calls Leader too, and both are checked (see leaders)
	nodes   int  // the number of Nodes of each Client
	mixedK  bool // Semaphore: client 0 counts 3 permits, the others 2
	permits int  // Semaphore: the permits its waiters count (2); else 0
	// stopOnInvalid: an actor stops at an error that matches ErrInvalid (twoaddrs, where
	// the library must refuse the configuration)
	stopOnInvalid bool
	servers       []*simServer // twoaddrs: checkServers looks at them
	quorum        int
	bad           chan violation // violations found during the run (twoaddrs, checkValid, checkGuard, hold.go)
	checks        sync.WaitGroup // checks that run on their own (checkReleased)
}

// checkServers records a violation if fewer than a quorum of distinct servers hold the lock
// that client was just granted (twoaddrs: two of its three Nodes reach one server).
func (e *env) checkServers(client int) {
	key := core.NewKeys("redlock:", lockName).Lock
	holding := 0
	for _, s := range e.servers {
		if m := s.sync(); m != nil && m.Exists(key) {
			holding++
		}
	}
	if holding < e.quorum {
		select {
		case e.bad <- violation{time.Now(), fmt.Sprintf("c%d granted the lock held on %d distinct server(s), fewer than a quorum (%d): one server counted twice",
			client, holding, e.quorum)}:
		default:
		}
	}
}

// holdersOf returns the servers that hold key now for its holder, just granted, and its
// value there: the value that a quorum of them hold (none if none does).
func (e *env) holdersOf(key string) map[int]string {
	values := map[int]string{}
	count := map[string]int{}
	for i, s := range e.servers {
		if m := s.sync(); m != nil {
			if v, err := m.Get(key); err == nil {
				values[i] = v
				count[v]++
			}
		}
	}
	for i, v := range values {
		if count[v] < e.quorum {
			delete(values, i)
		}
	}
	return values
}

// standing reports whether a quorum of the servers hold the run's lock key for one owner.
func (e *env) standing() bool {
	return len(e.holdersOf(core.NewKeys("redlock:", lockName).Lock)) > 0
}

// checkValid records a violation if, at the end of the validity of the holding of client
// whose lock key is key (at least that instant), the servers no longer hold it for the
// holder: every one of holders (see holdersOf) where nothing else could have taken it from
// the key (no per-call fault, cut or crash: the key set by the holder's last attempt, which
// began before its validity), else fewer than a quorum of them. The holder would count on
// a lock that others may take: the drift allowance, say, no longer covers the servers'
// clocks. Not in a run with crashes, where a server loses its keys and the restart guard,
// not the key, keeps the lock.
func (e *env) checkValid(client int, key string, holders map[int]string, until time.Time) {
	p := e.plan
	if len(p.crashes) > 0 {
		return
	}
	strict := p.callP == 0 && len(p.cuts) == 0
	held, lost := 0, []string{}
	for i, v := range holders {
		m := e.servers[i].sync()
		if m == nil {
			continue
		}
		if got, err := m.Get(key); err == nil && got == v {
			held++
		} else {
			lost = append(lost, e.servers[i].name)
		}
	}
	if (strict && len(lost) > 0) || held < e.quorum {
		slices.Sort(lost)
		select {
		case e.bad <- violation{time.Now(), fmt.Sprintf("c%d's lease is valid until %s, but at %s its key is gone from %v, held for it on %d server(s) (a quorum is %d)",
			client, e.rec.since(until), e.rec.since(time.Now()), lost, held, e.quorum)}:
		default:
		}
	}
}

// client returns client i's redlock Client over n nodes, each a go-redis client through
// its link, and the function that closes it all. With withCore, it returns too a
// core.Cluster over the same nodes, for what the root API does not offer (locks over
// several names at once); nil otherwise.
func (e *env) client(seed uint64, i, n int, withCore bool) (*redlock.Client, *core.Cluster, func()) {
	var nodes []redlock.Node
	var rdbs []*redis.Client
	for j := range n {
		s := j
		if len(e.servers) < n { // twoaddrs: nodes 0 and 1 reach server 0
			s = max(0, j-1)
		}
		srv := e.servers[s]
		rdb := redis.NewClient(&redis.Options{
			Addr:                     fmt.Sprintf("10.0.%d.%d:6379", s, j), // an IP: go-redis resolves a host name
			Dialer:                   func(context.Context, string, string) (net.Conn, error) { return srv.dial() },
			ContextTimeoutEnabled:    true,
			DisableIdentity:          true,
			Protocol:                 2,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			PoolSize:                 1024, // never waits for a connection: see simnet.PoolSize
		})
		rdbs = append(rdbs, rdb)
		l := &link{client: i, server: s, srv: srv, plan: e.plan, rec: e.rec, execTimeout: time.Second, bad: e.bad,
			rng: rand.New(rand.NewPCG(seed, uint64(3000+100*i+j)))}
		nodes = append(nodes, &node{inner: goredis.New(rdb), link: l, sharded: e.sharded})
	}
	opts := []redlock.Option{redlock.WithTTL(e.ttl), redlock.WithNodeTimeout(nodeTimeout), redlock.WithRestartGuard(e.guard)}
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		panic(err) // the configuration is the simulation's own
	}
	var cl *core.Cluster
	if withCore {
		if cl, err = core.NewCluster(nodes); err != nil {
			panic(err)
		}
	}
	return c, cl, func() {
		_ = c.Close()
		if cl != nil {
			cl.Close()
		}
		for _, r := range rdbs {
			_ = r.Close()
		}
	}
}

// checkTTLs returns a violation for each key that a server holds without a TTL.
func (e *env) checkTTLs() []violation {
	var out []violation
	for _, s := range e.servers {
		for _, k := range s.keys() {
			if k.ttl <= 0 {
				out = append(out, violation{time.Now(), fmt.Sprintf("key %q on %s has no TTL", k.key, s.name)})
			}
		}
	}
	return out
}
