package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPermanent: which errors no retry can fix.
func TestPermanent(t *testing.T) {
	node := func(errs ...error) error {
		q := &QuorumError{Op: "acquire", Key: "k", Quorum: 2, Nodes: 3}
		for i, err := range errs {
			q.Errs = append(q.Errs, NodeError{Node: fmt.Sprint("n", i), Err: err})
		}
		return q
	}
	crossslot := errors.New("CROSSSLOT Keys in request don't hash to the same slot")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrInvalid, true},
		{fmt.Errorf("redlock: acquire %q: %w", "k", ErrClosed), true},
		{crossslot, true},
		{errors.New("NOPERM this user has no permissions"), true},
		{errors.New("ERR user_script:1: Script attempted to access nonexistent global variable"), true},
		{errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{errors.New("LOADING Redis is loading the dataset in memory"), false},
		{errors.New("dial tcp 127.0.0.1:1: connection refused"), false},
		{fmt.Errorf("%w after 100ms", ErrNodeTimeout), false},
		{context.DeadlineExceeded, false},
		{&heldError{key: "k"}, false},
		{node(crossslot), false},                            // 2 of 3 may still answer
		{node(crossslot, crossslot), true},                  // no quorum is possible
		{node(crossslot, errors.New("i/o timeout")), false}, // the timeout may pass
		{node(ErrClosed, ErrClosed, ErrClosed), true},
	} {
		assert.Equal(t, c.want, Permanent(c.err), "%v", c.err)
	}
}

// TestPermanentErrorsEndTheWait: AcquireWait returns at once when no retry can fix its
// attempt's error (a node's closed client too), unless the Lock persists (Mutex.Lock), and
// then it reports each failed attempt to Failed and goes on until ctx ends. Only the
// Cluster's Close ends a persisting wait (TestCloseEndsWaits).
func TestPermanentErrorsEndTheWait(t *testing.T) {
	crossslot := func(context.Context, *Script) ([]int64, error) {
		return nil, errors.New("CROSSSLOT Keys in request don't hash to the same slot")
	}
	c, _ := cluster(t, crossslot)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := testLock()
	start := time.Now()
	_, err := c.AcquireWait(ctx, l, Backoff{Min: time.Millisecond, Max: time.Millisecond})
	require.Error(t, err)
	assert.True(t, Permanent(err))
	assert.ErrorContains(t, err, "node0: CROSSSLOT")
	assert.ErrorContains(t, err, `"x"`, "the error names the lock")
	assert.Less(t, time.Since(start), time.Second)

	var failed atomic.Int32
	l = testLock()
	l.Persist = true
	l.Failed = func(err error) { failed.Add(1) }
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err = c.AcquireWait(short, l, Backoff{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "CROSSSLOT", "the last attempt's error")
	assert.Greater(t, failed.Load(), int32(3), "a persisting wait retries and reports")

	// A node's closed driver client: permanent, but a persisting wait goes on through it.
	closedNode := func(context.Context, *Script) ([]int64, error) { return nil, fmt.Errorf("driver: %w", ErrClosed) }
	c, _ = cluster(t, closedNode)
	start = time.Now()
	_, err = c.AcquireWait(ctx, testLock(), Backoff{Min: time.Millisecond, Max: time.Millisecond})
	require.ErrorIs(t, err, ErrClosed)
	assert.Less(t, time.Since(start), time.Second)
	l = testLock()
	l.Persist = true
	short2, cancelShort2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort2()
	_, err = c.AcquireWait(short2, l, Backoff{Min: time.Millisecond, Max: time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestCloseEndsWaits: after Close, acquisitions fail with ErrClosed, and a waiter that was
// waiting for a holder wakes and fails with it at once; Release still works.
func TestCloseEndsWaits(t *testing.T) {
	c, _ := cluster(t, held(60_000), held(60_000), held(60_000))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	waiting := make(chan struct{})
	l := testLock()
	l.Persist = true // even a wait that goes on through permanent errors
	var once atomic.Bool
	l.Failed = func(error) {
		if once.CompareAndSwap(false, true) {
			close(waiting)
		}
	}
	go func() {
		_, err := c.AcquireWait(ctx, l, Backoff{Min: time.Minute, Max: time.Minute})
		done <- err
	}()
	<-waiting // its first attempt failed: it waits a minute
	start := time.Now()
	c.Close()
	c.Close() // twice is fine
	err := <-done
	require.ErrorIs(t, err, ErrClosed)
	assert.Less(t, time.Since(start), time.Second)
	_, err = c.Acquire(ctx, testLock())
	require.ErrorIs(t, err, ErrClosed)
	assert.True(t, Permanent(err))

	g, _ := cluster(t, grants(1))
	gl, err := g.Acquire(ctx, testLock())
	require.NoError(t, err)
	g.Close()
	assert.NotErrorIs(t, g.Release(ctx, gl), ErrClosed, "Release works after Close")
}

// TestExplained: the replies that say a deployment is wrong become ErrInvalid, naming what to
// change, and Permanent; others pass unchanged.
func TestExplained(t *testing.T) {
	// lineOf is the number of the first line of the acquire script that has every one of
	// words: Redis 7.0 names only the line of a refused call.
	lineOf := func(words ...string) int {
		for i, line := range strings.Split(acquireScript.Source(), "\n") {
			if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
				return i + 1
			}
		}
		t.Fatalf("no line of the acquire script has %q", words)
		return 0
	}
	refusedOn := func(words ...string) string {
		return fmt.Sprintf("ERR The user executing the script can't run this command or subcommand script: abc, on @user_script:%d.", lineOf(words...))
	}
	for _, tc := range []struct {
		reply   string
		cluster bool
		says    string // "": unchanged
	}{
		{refusedOn("'TIME'"), false, "the command TIME, which the acquire script"},
		{"ERR The user executing the script can't publish to the channel mentioned in the command script: abc, on @user_script:11.", false, "channel"},
		{"ERR ACL failure in script: User app has no permissions to run the 'time' command script: abc, on @user_script:78.", false, "the command TIME"},
		{"NOPERM this user has no permissions to run the 'evalsha' command", false, "the command EVALSHA"},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", false, "keys under the prefix"},
		{noUptime + "ERR The user executing the script can't run this command or subcommand", false, "INFO"},
		{"NOAUTH Authentication required.", false, "password"},
		{"ERR Protocol error: unauthenticated multibulk length", false, "password"},
		{"MOVED 2906 127.0.0.1:7001", false, "cluster client"},
		{"MOVED 2906 127.0.0.1:7001", true, ""},
		{"LOADING Redis is loading the dataset in memory", false, ""},
	} {
		err := explained(errors.New(tc.reply), tc.cluster, acquireScript)
		if tc.says == "" {
			assert.Equal(t, tc.reply, err.Error())
			assert.False(t, Permanent(err), tc.reply)
			continue
		}
		require.ErrorIs(t, err, ErrInvalid, tc.reply)
		assert.Contains(t, err.Error(), tc.says, tc.reply)
		assert.Contains(t, err.Error(), strings.TrimPrefix(tc.reply, noUptime), "the server's own words are kept")
		assert.True(t, Permanent(err), tc.reply)
	}
	// A line with several commands names each.
	two := NewScript("two", "local n = 1\nif redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], 1) end\n")
	err := explained(errors.New("ERR The user executing the script can't run this command or subcommand script: abc, on @user_script:2."), false, two)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "one of the commands EXISTS, SET")
}
