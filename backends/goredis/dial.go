package goredis

import (
	"fmt"
	"net"
	"strings"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/go-redis/v9"
)

// Dial returns a Node over a go-redis client of its own for one Redis master at addr:
// "host:port", or a URL that redis.ParseURL reads ("redis://user:password@host:port/db",
// "rediss://..." for TLS). The client has ContextTimeoutEnabled, which a Node needs, and
// otherwise go-redis's defaults or the URL's options. Dial connects to nothing: the client
// connects on first use, and again by itself after a failure.
//
// The Node owns the client: its Close (which redlock.Client.Close calls) closes it too.
// Dial is the dial function for redlock.Dial:
//
//	client, err := redlock.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, goredis.Dial)
//
// Dial fails with an error that matches core.ErrInvalid if addr is neither host:port nor a
// URL go-redis reads.
func Dial(addr string) (*Node, error) {
	var opt *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("%w: redlock: %q is not a Redis URL: %v", core.ErrInvalid, addr, err)
		}
	} else {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, fmt.Errorf("%w: redlock: %q is not host:port or a redis:// URL", core.ErrInvalid, addr)
		}
		opt = &redis.Options{Addr: addr}
	}
	opt.ContextTimeoutEnabled = true
	n := New(redis.NewClient(opt))
	n.owned = true
	return n, nil
}
