package rueidis

import (
	"fmt"
	"net"
	"strings"

	"github.com/go-redlock/redlock/core"
	"github.com/redis/rueidis"
)

// Dial returns a Lazy (see NewLazy) for one Redis master at addr: "host:port", or a URL
// that rueidis.ParseURL reads ("redis://user:password@host:port/db", "rediss://..." for
// TLS). Its client has AlwaysPipelining, so that a call the node timeout ends leaves its
// connection open (see New), and DisableCache, as a Node reads nothing through
// client-side caching; its other options are rueidis's defaults or the URL's. Like every
// Lazy, it connects to nothing until its first call, so a program can start while the
// server is down.
//
// The Lazy owns its client: its Close (which redlock.Client.Close calls) closes it. Dial is
// the dial function for redlock.Dial:
//
//	client, err := redlock.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, rlrueidis.Dial)
//
// Dial fails with an error that matches core.ErrInvalid if addr is neither host:port nor a
// URL rueidis reads.
func Dial(addr string) (*Lazy, error) {
	opt, err := dialOption(addr)
	if err != nil {
		return nil, err
	}
	return NewLazy(opt), nil
}

// dialOption returns Dial's client option for addr.
func dialOption(addr string) (rueidis.ClientOption, error) {
	var opt rueidis.ClientOption
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = rueidis.ParseURL(addr); err != nil || len(opt.InitAddress) == 0 {
			return opt, fmt.Errorf("%w: redlock: %q is not a Redis URL: %v", core.ErrInvalid, addr, err)
		}
	} else {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return opt, fmt.Errorf("%w: redlock: %q is not host:port or a redis:// URL", core.ErrInvalid, addr)
		}
		opt.InitAddress = []string{addr}
	}
	opt.AlwaysPipelining = true
	opt.DisableCache = true
	return opt, nil
}
