package redlock_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyOf returns a copy of *p, as a program that ignores vet's copylocks check makes one.
func copyOf[T any](p *T) *T {
	c := new(T)
	reflect.ValueOf(c).Elem().Set(reflect.ValueOf(p).Elem())
	return c
}

// panicOf runs f and returns what it panicked with ("" if it returned), or fails the test
// if f has not returned within 10 s: a copied Mutex hung in its local queue.
func panicOf(t *testing.T, f func()) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		defer func() { got <- fmt.Sprint(recover()) }()
		f()
	}()
	select {
	case p := <-got:
		if p == "<nil>" {
			return ""
		}
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("hung")
		return ""
	}
}

// TestCopiedMutexPanics: a Mutex or RWMutex copied after first use panics, saying so, at
// its next call, instead of hanging (a second Unlock of one holding, in the local queue)
// or taking another goroutine's place in the local queue. A copy made before first use is
// a Mutex of its own.
func TestCopiedMutexPanics(t *testing.T) {
	nodes, _ := miniNodes(t, 1)
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)

	m := c.NewMutex("copied")
	m.Lock()
	held := copyOf(m) // copied while locked
	m.Unlock()
	assert.Contains(t, panicOf(t, held.Unlock), "redlock: illegal use of a copied Mutex")

	used := copyOf(m) // copied after use, unlocked
	for _, f := range []func(){used.Lock, func() { _ = used.LockContext(ctx) }, func() { used.TryLock() }, used.Unlock,
		func() { _ = used.UnlockContext(ctx) }, func() { used.Lost() }} {
		assert.Contains(t, panicOf(t, f), "redlock: illegal use of a copied Mutex")
	}

	fresh := copyOf(c.NewMutex("fresh")) // copied before first use: usable
	require.NoError(t, fresh.LockContext(ctx))
	fresh.Unlock()

	rw := c.NewRWMutex("copied-rw")
	rw.Lock()
	w := copyOf(rw)
	rw.Unlock()
	assert.Contains(t, panicOf(t, w.Unlock), "redlock: illegal use of a copied RWMutex")
	rw.RLock()
	r := copyOf(rw)
	rw.RUnlock()
	for _, f := range []func(){r.RUnlock, r.RLock, func() { r.TryRLock() }, r.Lock, func() { r.TryLock() },
		func() { _ = r.LockContext(ctx) }, func() { _ = r.RLockContext(ctx) }, func() { r.Token() }, func() { r.Lost() },
		func() { r.RLocker().Lock() }} {
		assert.Contains(t, panicOf(t, f), "redlock: illegal use of a copied RWMutex")
	}
	// The originals still work.
	require.NoError(t, m.LockContext(ctx))
	m.Unlock()
	require.NoError(t, rw.LockContext(ctx))
	rw.Unlock()
}
