// Package ctxcall bounds a driver call by a context, for drivers that do not always do it
// themselves.
package ctxcall

import "context"

// Go runs call in a goroutine of its own and returns its outcome, or ctx's error as soon as
// ctx ends; call then goes on in the background until the driver's own timeouts end it.
// Where the driver itself ends calls when ctx does, call it directly instead: that spares
// the goroutine (and the closure's allocation).
func Go[T any](ctx context.Context, call func() (T, error)) (T, error) {
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		v, err := call()
		done <- outcome{v, err}
	}()
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
