package main

import (
	"context"
	"fmt"

	"github.com/go-redlock/redlock"
	rlgoredis "github.com/go-redlock/redlock/backends/goredis"
	rlredigo "github.com/go-redlock/redlock/backends/redigo"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// backends are the drivers a worker's Client can run over, each configured as bench
// configures it (see bench/README.md): go-redis with ContextTimeoutEnabled, redigo with a
// pool that keeps idle connections; rueidis with AlwaysPipelining, as the backend's doc
// advises where a server may be slow (bench keeps rueidis's defaults).
var backends = map[string]func(addr string) (redlock.Node, func(), error){
	"goredis": func(addr string) (redlock.Node, func(), error) {
		rdb := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		return rlgoredis.New(rdb), func() { rdb.Close() }, nil
	},
	"redigo": func(addr string) (redlock.Node, func(), error) {
		pool := &redigo.Pool{
			MaxIdle: 64,
			DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", addr)
			},
		}
		return rlredigo.New(pool, addr), func() { pool.Close() }, nil
	},
	"rueidis": func(addr string) (redlock.Node, func(), error) {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, AlwaysPipelining: true})
		if err != nil {
			return nil, nil, err
		}
		return rlrueidis.New(rc), rc.Close, nil
	},
}

// lockSettings are the options every worker's Client gets.
type lockSettings struct {
	backend string
	opts    []redlock.Option
}

// newClient returns worker's Client over addrs (its proxies, one per server), each node
// traced into t, and a function that closes the Client and then the driver clients.
func newClient(ls lockSettings, addrs []string, t *tracer, worker int) (*redlock.Client, func(), error) {
	mk, ok := backends[ls.backend]
	if !ok {
		return nil, nil, fmt.Errorf("unknown backend %q", ls.backend)
	}
	var nodes []redlock.Node
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for i, a := range addrs {
		n, closeDriver, err := mk(a)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, closeDriver)
		nodes = append(nodes, newTracedNode(n, t, worker, i))
	}
	c, err := redlock.New(nodes, ls.opts...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); closeAll() }, nil
}
