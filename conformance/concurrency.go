package conformance

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
)

const (
	// goroutines is how many goroutines the concurrency checks run on one Node at once.
	goroutines = 100
	// callBound is each of their calls' deadline: it includes the wait behind the other
	// calls, which on a loaded machine (miniredis runs scripts one at a time) can be long.
	callBound = 3 * waitBound
)

// concurrencyChecks: one Node used by 100 goroutines at once must give each call its own
// reply. Each goroutine's fence counter starts at its own value, so a reply delivered to the
// wrong caller shows.
func concurrencyChecks() []check {
	return []check{
		{"distinct-names", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			keys := make([]core.Keys, goroutines)
			for i := range keys {
				keys[i] = core.NewKeys(prefix(t), "concurrent-"+strconv.Itoa(i))
				admin(t, addr, "SET", keys[i].Fence, strconv.FormatInt(fenceOf(i), 10)) // one slot each on a cluster
			}
			acquire, extend, release := script(t, "acquire"), script(t, "extend"), script(t, "release")
			errs := together(t, func(i int) error {
				k, token := keys[i], "token-"+strconv.Itoa(i)
				steps := []struct {
					s    *core.Script
					keys []string
					args []string
					want []int64
				}{
					{acquire, acquireKeys(k), acquireArgs(token, ttl), []int64{1, fenceOf(i) + 1}},
					{extend, extendKeys(k), []string{token, ttl, "w"}, []int64{1}},
					{release, releaseKeys(k), releaseArgs(token, "w"), []int64{1, 0}},
				}
				for _, st := range steps {
					got, err := evalWithin(callBound, n, st.s, st.keys, st.args...)
					if err != nil {
						return fmt.Errorf("%s: error %v", st.s.Name(), err)
					}
					if fmt.Sprint(got) != fmt.Sprint(st.want) {
						return fmt.Errorf("%s: replied %s, want %v (a reply meant for another caller?)", st.s.Name(), format(got), st.want)
					}
				}
				return nil
			})
			for i, err := range errs {
				if err != nil {
					t.Errorf("goroutine %d of %d running acquire, extend and release on its own lock: %v", i, goroutines, err)
				}
			}
		}},
		{"one-name", func(t *testing.T, e *env) {
			addr := e.server(t)
			n := e.node(t, addr)
			k := core.NewKeys(prefix(t), "contended")
			acquire := script(t, "acquire")
			replies := make([][]int64, goroutines)
			errs := together(t, func(i int) error {
				got, err := evalWithin(callBound, n, acquire, acquireKeys(k), acquireArgs("token-"+strconv.Itoa(i), ttl)...)
				replies[i] = got
				return err
			})
			winners := 0
			winner := -1
			for i, got := range replies {
				switch {
				case errs[i] != nil:
					t.Errorf("goroutine %d of %d acquiring one shared lock: error %v", i, goroutines, errs[i])
				case len(got) >= 2 && got[0] == 1:
					winners++
					winner = i
				case len(got) >= 2 && got[0] == 0:
					if got[1] <= 0 || got[1] > ttlMS {
						t.Errorf("goroutine %d of %d was refused with pttl %d, want 0 < pttl <= %d", i, goroutines, got[1], ttlMS)
					}
				default:
					t.Errorf("goroutine %d of %d acquiring one shared lock: reply %s, want {1, fence} or {0, pttl}", i, goroutines, format(got))
				}
			}
			assert.Equal(t, 1, winners, "%d goroutines acquired one lock at once and %d replies said they won: exactly one must win (more: does the Node share reply memory between callers? see replies/own-memory)", goroutines, winners)
			if winners == 1 {
				assert.Equal(t, "token-"+strconv.Itoa(winner), admin(t, addr, "GET", k.Lock), "the lock must hold the token of the goroutine whose reply said it won")
			}
		}},
	}
}

// fenceOf is the fence counter goroutine i's lock starts at: distinct per goroutine, and
// above any server clock in microseconds, so that acquire replies exactly fenceOf(i)+1.
func fenceOf(i int) int64 { return bigFence + int64(i)*1000 }

// together runs f(0) ... f(goroutines-1) in as many goroutines, released at one instant,
// and returns their errors. It fails the check if they have not all returned within
// callBound and a little more.
func together(t *testing.T, f func(i int) error) []error {
	t.Helper()
	errs := make([]error, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	close(start)
	select {
	case <-done:
	case <-time.After(callBound + waitBound):
		t.Fatalf("%d concurrent Evals on one Node had not all returned after %v (each had a %v deadline): the Node deadlocks under concurrency", goroutines, callBound+waitBound, callBound)
	}
	return errs
}
