package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redlock/redlock"
)

// warmUp readies every Client before the window opens, as a long-running service's Client
// is when a fault comes: with a connection to every server for its calls and one for its
// wake-up subscriptions, and every script loaded. Each Client takes a lock of its own
// (prefix + its index), extends it, and holds it while the next Client waits for it within
// waitFor, which subscribes the waiter and then gives up; then each lets go. Without it,
// each phase's first moments measured the drivers' handshakes (four round trips before
// go-redis's first command) rather than the lock: tens of ms with no fault, and up to a
// second under latency. (A single Client waits for its own lock in-process, and so does
// not subscribe.)
//
// A Client that fails to warm up is reported; one whose wait ended in its timeout (the
// expected end) or that got the lock is not.
func warmUp(clients []*redlock.Client, prefix string, waitFor time.Duration) error {
	leases := make([]*redlock.Lease, len(clients))
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		l, err := c.Acquire(ctx, fmt.Sprint(prefix, i))
		cancel()
		if err != nil {
			return fmt.Errorf("warm-up of worker %d: %w", i, err)
		}
		leases[i] = l
		ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
		err = l.Extend(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("warm-up of worker %d: %w", i, err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			l, err := c.Acquire(ctx, fmt.Sprint(prefix, (i+1)%len(clients)))
			switch {
			case err == nil:
				_ = l.Release(context.Background())
			case !errors.Is(err, context.DeadlineExceeded):
				errs[i] = fmt.Errorf("warm-up of worker %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	for _, l := range leases {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_ = l.Release(ctx)
		cancel()
	}
	return errors.Join(errs...)
}
