// Command quickstart shows a Redlock lock over several Redis masters: one client takes it,
// a second is refused, then gets it once the first lets go.
//
// It runs with no Redis installed, over 5 embedded in-process servers (miniredis), or over
// real servers:
//
//	go run ./examples/quickstart
//	REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go run ./examples/quickstart
//
// Over real servers that started less than 30 s ago, the first acquisition waits until
// they have been up for 30 s: the restart guard (see redlock.WithRestartGuard), on by
// default at every number of servers, one too, keeps a server that may have forgotten the locks it
// granted before a restart from voting. The program says so, and waits.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	"github.com/go-redlock/redlock/examples/internal/exampleservers"
)

func main() {
	if err := run(os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart failed:", err)
		os.Exit(1)
	}
}

// run prints the demo's steps to out and the library's warnings to logs.
func run(out, logs io.Writer) error {
	// Bound the whole demo, so that unreachable servers end it with an error, not a hang.
	// It outlasts the restart guard (30 s), which fresh servers make the first lock wait.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// One address per independent Redis master: those in REDIS_ADDRS, or else 5 embedded
	// servers started here.
	srv, err := exampleservers.Start(5, "")
	if err != nil {
		return err
	}
	defer srv.Stop()
	addrs, embedded := srv.Lock, srv.Embedded
	if embedded {
		fmt.Fprintln(out, "REDIS_ADDRS is not set: started 5 embedded Redis servers (miniredis)")
	}

	// Two clients stand for two processes competing for one lock. The logger says why a
	// lock is slow to come, if it is (servers down, or under the restart guard). The node
	// timeout is generous, for a demo that may run on a busy machine (a node slower than
	// it counts as failed); the default is 100ms.
	opts := []redlock.Option{redlock.WithTTL(10 * time.Second), redlock.WithNodeTimeout(time.Second),
		redlock.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if embedded {
		// miniredis cannot report its uptime, so it cannot apply the restart guard: an
		// embedded server's data goes with the process anyway.
		opts = append(opts, redlock.WithRestartGuard(0))
	}
	// Each Client makes a go-redis client per master (goredis.Dial), and closes them.
	a, err := redlock.Dial(addrs, goredis.Dial, opts...)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := redlock.Dial(addrs, goredis.Dial, opts...)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(out, "Using %d Redis masters: %s\n", len(addrs), strings.Join(addrs, ", "))

	leaseA, err := a.TryAcquire(ctx, "quickstart")
	if errors.Is(err, redlock.ErrRestarted) {
		fmt.Fprintf(out, "The servers started recently and abstain under the restart guard; waiting for it to pass:\n  %v\n", err)
		leaseA, err = a.Acquire(ctx, "quickstart")
	}
	if err != nil {
		return fmt.Errorf("client A could not acquire the lock: %w", err)
	}
	fmt.Fprintf(out, "A acquired %q: fencing token %d, valid for %v\n",
		leaseA.Name(), leaseA.Token(), time.Until(leaseA.Until()).Round(time.Millisecond))

	_, err = b.TryAcquire(ctx, "quickstart")
	if !errors.Is(err, redlock.ErrHeld) {
		return fmt.Errorf("client B's TryAcquire should have been refused with ErrHeld, got: %v", err)
	}
	fmt.Fprintln(out, "B tried to acquire it and was refused: the lock is held (redlock.ErrHeld)")

	if err := leaseA.Release(ctx); err != nil {
		return fmt.Errorf("client A could not release the lock: %w", err)
	}
	fmt.Fprintln(out, "A released the lock")

	leaseB, err := b.TryAcquire(ctx, "quickstart")
	if err != nil {
		return fmt.Errorf("client B could not acquire the free lock: %w", err)
	}
	if leaseB.Token() <= leaseA.Token() {
		return fmt.Errorf("client B's token %d is not larger than A's %d", leaseB.Token(), leaseA.Token())
	}
	fmt.Fprintf(out, "B acquired it: fencing token %d, larger than A's %d\n", leaseB.Token(), leaseA.Token())

	if err := leaseB.Release(ctx); err != nil {
		return fmt.Errorf("client B could not release the lock: %w", err)
	}
	fmt.Fprintln(out, "B released the lock")

	return nil
}
