package redigo

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/gomodule/redigo/redis"
)

// Pool settings of Dial's pool: idle connections kept for the next calls, and how long one
// may stay idle before the pool closes it.
const (
	dialMaxIdle     = 8
	dialIdleTimeout = 5 * time.Minute
)

// Dial returns a Node over a redigo pool of its own for one Redis master at addr:
// "host:port", or a URL that redis.DialURLContext reads ("redis://user:password@host:port/db",
// "rediss://..." for TLS). The pool dials with the caller's context (DialContext), keeps up
// to 8 idle connections for 5 minutes, and has no bound on active ones, so Subscribe's
// connection always finds room. The Node is named by the address's host:port, never by a
// URL's password. Dial connects to nothing: the pool dials on first use.
//
// The Node owns the pool: its Close (which redlock.Client.Close calls) closes it too. Dial
// is the dial function for redlock.Dial:
//
//	client, err := redlock.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, redigo.Dial)
//
// Dial fails with an error that matches core.ErrInvalid if addr is neither host:port nor a
// redis:// or rediss:// URL with a host.
func Dial(addr string) (*Node, error) {
	var dial func(ctx context.Context) (redis.Conn, error)
	name := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return nil, fmt.Errorf("%w: redlock: %q is not a redis:// or rediss:// URL", core.ErrInvalid, redacted(addr, u))
		}
		name = u.Host
		dial = func(ctx context.Context) (redis.Conn, error) { return redis.DialURLContext(ctx, addr) }
	} else {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, fmt.Errorf("%w: redlock: %q is not host:port or a redis:// URL", core.ErrInvalid, addr)
		}
		dial = func(ctx context.Context) (redis.Conn, error) { return redis.DialContext(ctx, "tcp", addr) }
	}
	pool := &redis.Pool{MaxIdle: dialMaxIdle, IdleTimeout: dialIdleTimeout, DialContext: dial}
	n := New(pool, name)
	n.owned = pool
	return n, nil
}

// redacted returns addr without a URL's password, if u (addr parsed, or nil) has one.
func redacted(addr string, u *url.URL) string {
	if u == nil {
		return addr
	}
	return u.Redacted()
}
