package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// connectTimeout bounds the first connection to each node (dial and handshake), made before
// the lock is attempted so that the node timeout bounds the lock's round trips, not a
// connection's setup. A node that cannot connect in time is left to fail the attempt.
const connectTimeout = 2 * time.Second

// parseAddrs parses a comma-separated list of Redis masters: host:port, or redis:// and
// rediss:// URLs. Empty entries are skipped; the same address twice is an error (one server
// must not count as two votes), as is a bad URL.
func parseAddrs(list string) ([]*redis.Options, error) {
	var opts []*redis.Options
	seen := map[string]bool{}
	for _, addr := range strings.Split(list, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		o := &redis.Options{Addr: addr}
		if strings.Contains(addr, "://") {
			var err error
			if o, err = redis.ParseURL(addr); err != nil {
				return nil, fmt.Errorf("bad Redis URL %q: %v", addr, err)
			}
		}
		if seen[o.Addr] {
			return nil, fmt.Errorf("address %s is given twice: each must be a different Redis master", o.Addr)
		}
		seen[o.Addr] = true
		// A call whose context ends must not keep its connection busy until go-redis's own
		// read timeout (see backends/goredis).
		o.ContextTimeoutEnabled = true
		opts = append(opts, o)
	}
	return opts, nil
}

// nodeSet is the redlock Nodes of a run, each over a go-redis client of its own.
type nodeSet struct {
	clients []*redis.Client
	nodes   []redlock.Node
}

// newNodes returns a Node per address. go-redis connects lazily: see connect.
func newNodes(addrs []*redis.Options) *nodeSet {
	s := &nodeSet{}
	for _, o := range addrs {
		c := redis.NewClient(o)
		s.clients = append(s.clients, c)
		s.nodes = append(s.nodes, goredis.New(c))
	}
	return s
}

// connect makes each client's first connection, all at once, within connectTimeout, and
// returns the failures, one line per node, or nil. They do not stop the lock attempt, which
// may find a majority of nodes all the same; if it does not, they say why.
func (s *nodeSet) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	errs := make([]error, len(s.clients))
	var wg sync.WaitGroup
	for i, c := range s.clients {
		wg.Go(func() {
			if err := c.Ping(ctx).Err(); err != nil {
				errs[i] = fmt.Errorf("connecting to %s: %w", c.Options().Addr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// quietRedis is a go-redis logger that drops everything. go-redis logs each failed dial to
// standard error, several times a second while a node is down; redlock reports the nodes'
// failures itself.
type quietRedis struct{}

// Printf drops its message.
func (quietRedis) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietRedis{}) }

// close closes the go-redis clients: call it after the redlock Client's Close.
func (s *nodeSet) close() {
	for _, c := range s.clients {
		_ = c.Close() // nothing to do about an error on the way out
	}
}
