package redlock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-redlock/redlock"
	"github.com/stretchr/testify/assert"
)

// TestNilClientPanicsClearly: every exported method of a nil *Client, or of a Client not
// made by New, panics with a message that says so, not with a nil dereference.
func TestNilClientPanicsClearly(t *testing.T) {
	ctx := context.Background()
	for _, c := range []*redlock.Client{nil, new(redlock.Client)} {
		for name, call := range map[string]func(){
			"Close":         func() { _ = c.Close() },
			"Unguarded":     func() { c.Unguarded() },
			"TryAcquire":    func() { _, _ = c.TryAcquire(ctx, "x") },
			"Acquire":       func() { _, _ = c.Acquire(ctx, "x") },
			"Do":            func() { _ = c.Do(ctx, "x", func(context.Context) error { return nil }) },
			"NewMutex":      func() { c.NewMutex("x").TryLock() },
			"NewRWMutex":    func() { c.NewRWMutex("x").TryRLock() },
			"NewMutexAll":   func() { c.NewMutexAll([]string{"x"}).TryLock() },
			"NewRWMutexAll": func() { c.NewRWMutexAll([]string{"x"}).TryRLock() },
			"NewSemaphore":  func() { _, _ = c.NewSemaphore("x", 1).TryAcquire(ctx) },
			"NewElection":   func() { _, _ = c.NewElection("x").Leader(ctx) },
		} {
			var got any
			func() {
				defer func() { got = recover() }()
				call()
			}()
			msg := fmt.Sprint(got)
			assert.Contains(t, msg, "redlock: "+name+" called on", "%s of %#v", name, c)
			assert.Contains(t, msg, "(create it with New)", name)
		}
	}
}

// TestZeroPrimitivesSaySo: a zero Semaphore or Election reports ErrInvalid, saying what to
// use, rather than a nil dereference.
func TestZeroPrimitivesSaySo(t *testing.T) {
	ctx := context.Background()
	var s redlock.Semaphore
	_, err := s.TryAcquire(ctx)
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = s.Acquire(ctx)
	assert.ErrorContains(t, err, "zero Semaphore")
	var e redlock.Election
	_, err = e.Campaign(ctx, "v")
	assert.ErrorContains(t, err, "zero Election")
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	assert.ErrorContains(t, err, `redlock: leader "": invalid argument: zero Election`)
	_, open := <-e.Observe(ctx)
	assert.False(t, open)
}
