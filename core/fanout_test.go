package core

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFanOutIsReusedOnlyWhenEveryCallAnswered: a fan-out whose reader is done while a call
// is still under way (a node that ignores its deadline) is not handed to the next
// operation until that call answered, and its late reply is not read by anyone.
func TestFanOutIsReusedOnlyWhenEveryCallAnswered(t *testing.T) {
	late := make(chan struct{})
	answered := make(chan struct{})
	fast := func(context.Context, *Script) ([]int64, error) { return []int64{1}, nil }
	var calls atomic.Int32
	slow := func(context.Context, *Script) ([]int64, error) {
		if calls.Add(1) > 1 {
			return []int64{1}, nil
		}
		<-late // the first call ignores ctx
		defer close(answered)
		return []int64{0}, nil
	}
	c, err := NewCluster([]Node{&fakeNode{name: "a", eval: fast}, &fakeNode{name: "b", eval: fast}, &fakeNode{name: "c", eval: slow}})
	require.NoError(t, err)

	f := c.call(context.Background(), 20*time.Millisecond, extendScript, []string{"k"}, "token", "1000")
	tl := tally{c: c, op: "extend", key: "k"}
	c.collect(context.Background(), f, &tl, make([]bool, 3), nil)
	require.True(t, tl.won())
	f.done() // the third call is still under way

	for range 20 { // while it is, the pool never hands f out
		g := c.call(context.Background(), 20*time.Millisecond, extendScript, []string{"k"}, "token", "1000")
		assert.NotSame(t, f, g)
		g.done()
	}
	close(late)
	<-answered
	// Then it is recycled, without the late reply.
	assert.Eventually(t, func() bool { return f.refs.Load() == 0 && len(f.out) == 0 }, time.Second, time.Millisecond)
}
