package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/redis/go-redis/v9"
)

// connectTimeout bounds the first connection to each node (dial and handshake), made
// before the lock is attempted so that the node timeout bounds the lock's round trips, not
// a connection's setup. A node that cannot connect in time is left to fail the attempt.
// -wait, when shorter, bounds it too. The usage text, doc.go and the README say 2s.
const connectTimeout = 2 * time.Second

// parseAddrs parses a comma-separated list of Redis masters: host:port, or redis://,
// rediss://, valkey:// and valkeys:// URLs (see parseAddrList).
func parseAddrs(list string) ([]*redis.Options, error) {
	opts, _, err := parseAddrList(list)
	return opts, err
}

// valkeySchemes are the URL schemes of Valkey, and the Redis schemes they stand for.
var valkeySchemes = map[string]string{"valkey://": "redis://", "valkeys://": "rediss://"}

// parseAddrList parses a comma-separated list of Redis masters: host:port, or redis:// and
// rediss:// URLs, or valkey:// and valkeys:// URLs, which are read as redis:// and
// rediss:// are. It returns each address's options, and whether it was a URL. Empty
// entries are skipped; the same address twice is an error (one server must not count as
// two votes), as are an address without a host or a port and a bad URL.
func parseAddrList(list string) ([]*redis.Options, []bool, error) {
	var (
		opts []*redis.Options
		urls []bool
	)
	seen := map[string]bool{}
	for _, addr := range strings.Split(list, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		o := &redis.Options{Addr: addr}
		url := strings.Contains(addr, "://")
		if url {
			parsed := addr
			for valkey, redisScheme := range valkeySchemes {
				if len(addr) >= len(valkey) && strings.EqualFold(addr[:len(valkey)], valkey) {
					parsed = redisScheme + addr[len(valkey):]
				}
			}
			var err error
			if o, err = redis.ParseURL(parsed); err != nil {
				return nil, nil, fmt.Errorf("bad Redis URL %q: %v", addr, strings.ReplaceAll(err.Error(), parsed, addr))
			}
		} else if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			return nil, nil, fmt.Errorf("bad address %q: want host:port, or a redis://, rediss://, valkey:// or valkeys:// URL", addr)
		}
		if seen[o.Addr] {
			return nil, nil, fmt.Errorf("address %s is given twice: each must be a different Redis master", o.Addr)
		}
		seen[o.Addr] = true
		// A call whose context ends must not keep its connection busy until go-redis's own
		// read timeout (see backends/goredis).
		o.ContextTimeoutEnabled = true
		opts, urls = append(opts, o), append(urls, url)
	}
	return opts, urls, nil
}

// nodeSet is the redlock Nodes of a run, each over a go-redis client of its own, and the
// state of their first connections (see connect).
type nodeSet struct {
	clients []*redis.Client
	nodes   []redlock.Node

	mu    sync.Mutex
	start time.Time     // when connect began
	conns []connection  // per client
	ended chan struct{} // a connection ended: connect counts again
}

// connection is the state of a client's first connection.
type connection struct {
	done    bool
	err     error         // nil if it connected
	took    time.Duration // from connect's start to its end
	dialErr error         // the error of the client's last dial, if it failed
}

// newNodes returns a Node per address. go-redis connects lazily: see connect.
func newNodes(addrs []*redis.Options) *nodeSet {
	s := &nodeSet{conns: make([]connection, len(addrs)), ended: make(chan struct{}, len(addrs))}
	for i, o := range addrs {
		o.Dialer = s.dialer(i, redis.NewDialer(o))
		c := redis.NewClient(o)
		s.clients = append(s.clients, c)
		s.nodes = append(s.nodes, goredis.New(c))
	}
	return s
}

// dialer returns client i's dialer: dial, and a record of its last error, for failures to
// report. go-redis retries a failed dial until the context ends, whose error then hides
// the cause (a refused connection, an unknown host).
func (s *nodeSet) dialer(i int, dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil || ctx.Err() == nil { // a dial that the context ended says nothing new
			s.mu.Lock()
			s.conns[i].dialErr = err
			s.mu.Unlock()
		}
		return conn, err
	}
}

// connect makes each client's first connection, all at once, each within connectTimeout
// and ctx, and returns as soon as a majority of the nodes has connected (a quorum may grant
// the lock: waiting for the rest would only delay the attempt), or every node has connected
// or failed, or ctx has ended. The connections still under way go on in the background,
// within the same bounds: a node that connects late is ready for a later attempt. Failures
// do not stop the lock attempt, which may find a majority of nodes all the same; if it does
// not, failures says why.
func (s *nodeSet) connect(ctx context.Context) {
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	for i, c := range s.clients {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			err := c.Ping(cctx).Err()
			s.mu.Lock()
			s.conns[i].done, s.conns[i].err, s.conns[i].took = true, err, time.Since(s.start)
			s.mu.Unlock()
			s.ended <- struct{}{}
		}()
	}
	quorum := len(s.clients)/2 + 1
	for ended, connected := 0, 0; ended < len(s.clients) && connected < quorum; ended++ {
		select {
		case <-s.ended:
		case <-ctx.Done():
			return
		}
		s.mu.Lock()
		connected = 0
		for _, c := range s.conns {
			if c.done && c.err == nil {
				connected++
			}
		}
		s.mu.Unlock()
	}
}

// failures returns the nodes that have not connected, one line per node (its error, its
// last failed dial, or how long it has not answered), or nil.
func (s *nodeSet) failures() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for i, c := range s.conns {
		addr := s.clients[i].Options().Addr
		switch {
		case c.done && c.err == nil:
		case c.done && !isTimeout(c.err):
			errs = append(errs, fmt.Errorf("connecting to %s: %w", addr, c.err))
		case c.dialErr != nil:
			errs = append(errs, fmt.Errorf("connecting to %s: %w", addr, c.dialErr))
		case c.done:
			errs = append(errs, fmt.Errorf("connecting to %s: no answer within %v", addr, c.took.Round(time.Millisecond)))
		default:
			errs = append(errs, fmt.Errorf("connecting to %s: no answer after %v", addr, time.Since(s.start).Round(time.Millisecond)))
		}
	}
	return errors.Join(errs...)
}

// isTimeout reports whether err is a connection's deadline or cancellation: a node that did
// not answer in time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		(errors.As(err, &ne) && ne.Timeout())
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
