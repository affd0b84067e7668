package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/require"
)

// closerNode is a Node that records its Close calls; its scripts fail.
type closerNode struct {
	addr   string
	closes int
}

func (n *closerNode) Eval(context.Context, *core.Script, []string, ...string) ([]int64, error) {
	return nil, errors.New("closerNode runs no script")
}

func (n *closerNode) EvalStrings(context.Context, *core.Script, []string, ...string) ([]string, error) {
	return nil, errors.New("closerNode runs no script")
}

func (n *closerNode) String() string { return n.addr }

func (n *closerNode) Close() error {
	n.closes++
	return nil
}

// closerDial returns a dial function that makes closerNodes, recorded in *made, and fails
// with fail for the address failAddr.
func closerDial(made *[]*closerNode, failAddr string, fail error) func(string) (*closerNode, error) {
	return func(addr string) (*closerNode, error) {
		if addr == failAddr {
			return nil, fail
		}
		n := &closerNode{addr: addr}
		*made = append(*made, n)
		return n, nil
	}
}

// requireClosedOnce fails unless each node was closed exactly once.
func requireClosedOnce(t *testing.T, nodes []*closerNode) {
	t.Helper()
	for _, n := range nodes {
		require.Equal(t, 1, n.closes, "Close calls of the node of %s", n.addr)
	}
}

// TestDialClientClosesItsNodes: the Client Dial makes owns the nodes: its Close closes each
// once, however often it is called.
func TestDialClientClosesItsNodes(t *testing.T) {
	var made []*closerNode
	c, err := redlock.Dial([]string{"a:1", "b:1", "c:1"}, closerDial(&made, "", nil))
	require.NoError(t, err)
	require.Len(t, made, 3)
	for _, n := range made {
		require.Zero(t, n.closes, "a node closed before Client.Close")
	}
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	requireClosedOnce(t, made)
}

// TestDialRefusesBadInput: no addresses, a nil dial function and an address given twice are
// refused with ErrInvalid before any node is made; a dial that fails, a nil node and an
// option New refuses end Dial with an error that names the cause, after closing every node
// made.
func TestDialRefusesBadInput(t *testing.T) {
	var made []*closerNode
	dial := closerDial(&made, "", nil)

	_, err := redlock.Dial(nil, dial)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, "no addresses")
	_, err = redlock.Dial[*closerNode]([]string{"a:1"}, nil)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = redlock.Dial([]string{"a:1", "b:1", "a:1"}, dial)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, `"a:1" given twice`)
	require.Empty(t, made, "nodes made for input refused before dialling")

	refused := errors.New("no such host")
	_, err = redlock.Dial([]string{"a:1", "b:1", "c:1"}, closerDial(&made, "b:1", refused))
	require.ErrorIs(t, err, refused)
	require.ErrorContains(t, err, `"b:1"`)
	require.Len(t, made, 1)
	requireClosedOnce(t, made)

	made = nil
	_, err = redlock.Dial([]string{"a:1", "b:1"}, func(addr string) (*closerNode, error) {
		if addr == "b:1" {
			return nil, nil
		}
		return dial(addr)
	})
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorContains(t, err, `address "b:1"`)
	requireClosedOnce(t, made)

	made = nil
	_, err = redlock.Dial([]string{"a:1", "b:1", "c:1"}, dial, redlock.WithDriftFactor(2))
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.Len(t, made, 3)
	requireClosedOnce(t, made)
}

// A Client from the addresses of three Redis masters, each reached through a go-redis
// client that goredis.Dial makes and the Client closes. Here three in-process servers
// (miniredis) stand in for the masters.
func ExampleDial() {
	var addrs []string
	for range 3 {
		srv, err := miniredis.Run()
		if err != nil {
			panic(err)
		}
		defer srv.Close()
		addrs = append(addrs, srv.Addr())
	}

	client, err := redlock.Dial(addrs, goredis.Dial)
	if err != nil {
		panic(err)
	}
	defer client.Close() // releases its locks and closes the go-redis clients

	mu := client.NewMutex("jobs:nightly")
	mu.Lock()
	fmt.Println("locked")
	mu.Unlock()
	fmt.Println("unlocked")
	// Output:
	// locked
	// unlocked
}
