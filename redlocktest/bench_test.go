package redlocktest_test

import (
	"testing"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/redlocktest"
)

// BenchmarkLockUnlock measures an uncontended Mutex Lock and Unlock through a Client of
// the kit, over its 3 servers, in real time (no bubble).
func BenchmarkLockUnlock(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"default", nil},
		{"no guard", []redlock.Option{redlock.WithRestartGuard(0)}}, // a plain SET NX first
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := redlocktest.New(b).Client(bc.opts...).NewMutex("bench")
			for b.Loop() {
				if err := m.LockContext(ctx); err != nil {
					b.Fatal(err)
				}
				m.Unlock()
			}
		})
	}
}
