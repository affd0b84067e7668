package redlock

import (
	"errors"
	"fmt"
	"io"
	"reflect"
)

// Dial returns a Client over one node per address, each made by dial: a backend's Dial,
// such as goredis.Dial, which makes a driver client of its own for the address with the
// options the backend needs. The Client owns those nodes: its Close closes each one that is
// an io.Closer, and a backend's Dial node closes its driver client with it. opts are New's.
//
//	client, err := redlock.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, goredis.Dial)
//
// Each address is one independent Redis master, in whatever form dial reads (the backends
// take host:port and redis:// URLs). Dial fails with an error that matches ErrInvalid if
// addrs is empty or names an address twice, or if New refuses the nodes or an option; if
// dial fails for an address, Dial returns its error, naming the address. Before it returns
// an error, it closes every node it made. Dial connects to nothing itself (the backends'
// drivers connect on first use), so a Client can be made while its servers are down.
func Dial[N Node](addrs []string, dial func(addr string) (N, error), opts ...Option) (*Client, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: no addresses", ErrInvalid)
	}
	if dial == nil {
		return nil, fmt.Errorf("%w: a nil dial function", ErrInvalid)
	}
	seen := make(map[string]bool, len(addrs))
	for _, addr := range addrs {
		if seen[addr] {
			return nil, fmt.Errorf("%w: address %q given twice: one server must not count as two votes", ErrInvalid, addr)
		}
		seen[addr] = true
	}
	nodes := make([]Node, 0, len(addrs))
	for _, addr := range addrs {
		n, err := dial(addr)
		if err == nil && nilNode(n) {
			err = fmt.Errorf("%w: the dial function returned a nil node", ErrInvalid)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("redlock: address %q: %w", addr, err), closeNodes(nodes))
		}
		nodes = append(nodes, n)
	}
	c, err := New(nodes, opts...)
	if err != nil {
		return nil, errors.Join(err, closeNodes(nodes))
	}
	return c, nil
}

// closeNodes closes each node that is an io.Closer and returns their errors joined.
func closeNodes(nodes []Node) error {
	var errs []error
	for _, n := range nodes {
		if closer, ok := n.(io.Closer); ok {
			errs = append(errs, closer.Close())
		}
	}
	return errors.Join(errs...)
}

// nilNode reports whether n is a nil interface or holds a nil pointer.
func nilNode(n Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
