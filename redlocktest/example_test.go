package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/redlocktest"
)

// ledger is the store of the code under test: it records the invoices paid, and the
// fencing token each payment came with.
type ledger struct {
	mu   sync.Mutex
	paid []string
}

func (l *ledger) pay(invoice string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paid = append(l.paid, invoice)
}

// settle is the code under test: it must pay an invoice only while it holds the invoice's
// lock, so that two processes never pay one invoice twice.
func settle(ctx context.Context, client *redlock.Client, l *ledger, invoice string) error {
	lease, err := client.TryAcquire(ctx, "invoice:"+invoice)
	if err != nil {
		return fmt.Errorf("settle %s: %w", invoice, err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	l.pay(invoice, lease.Token())
	return nil
}

// exampleT stands in for the *testing.T of a test, which an Example has none of: a test
// passes its own t to redlocktest.New.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }

// end runs the cleanups, as a test's end does.
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// A function that must run under a lock, tested with servers down and paused: in a test,
// t is the test's *testing.T.
func Example() {
	t := new(exampleT)
	defer t.end()
	ctx := context.Background()

	cluster := redlocktest.New(t) // 3 servers
	client := cluster.Client()
	l := new(ledger)

	// One server down: the other two make the quorum.
	cluster.Server(0).Fail()
	fmt.Println(settle(ctx, client, l, "A-1"))

	// And one more paused: no quorum, so nothing is paid.
	cluster.Server(1).Pause()
	err := settle(ctx, client, l, "A-2")
	fmt.Println(errors.Is(err, redlock.ErrNoQuorum), errors.Is(err, redlock.ErrNodeTimeout))
	fmt.Println(l.paid)
	// Output:
	// <nil>
	// true true
	// [A-1]
}

// A lock that expires under its holder: Cluster.Expire ends it on every server, and the
// holder finds out at its next extension (a short TTL keeps that short in real time: here
// 2 s, when a third of its validity is left).
func ExampleCluster_Expire() {
	t := new(exampleT)
	defer t.end()
	ctx := context.Background()

	cluster := redlocktest.New(t)
	client := cluster.Client(redlock.WithTTL(3 * time.Second))
	err := client.Do(ctx, "report", func(ctx context.Context) error {
		cluster.Expire("report")
		<-ctx.Done() // the code under test must stop here: the lock is gone
		return nil
	})
	fmt.Println(errors.Is(err, redlock.ErrLost))
	// Output: true
}

// A test inside a testing/synctest bubble: the servers' keys expire on the bubble's clock,
// so a 30 s lease lapses at once in real time. (An Example has no *testing.T to run it.)
func Example_synctest() {
	_ = func(t *testing.T) { // func TestLeaseLapses(t *testing.T)
		synctest.Test(t, func(t *testing.T) {
			cluster := redlocktest.New(t)
			client := cluster.Client()
			lease, err := client.TryAcquire(context.Background(), "report", redlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			<-lease.Done() // 30 s (less the drift allowance) on the bubble's clock
			if !errors.Is(lease.Err(), redlock.ErrExpired) {
				t.Fatal(lease.Err())
			}
		})
	}
}
