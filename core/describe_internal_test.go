package core

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadDescriptionIsRefusedBeforeAnyCall: Acquire and AcquireWait (with Persist too)
// refuse a description that CheckDescription refuses, with an error that matches
// ErrInvalid and names the lock, and call no node.
func TestBadDescriptionIsRefusedBeforeAnyCall(t *testing.T) {
	for _, d := range []string{"web 3", "a@b", "tab\there", "line\n", "\xff", "\u00a0", strings.Repeat("d", MaxDescriptionLen+1)} {
		require.ErrorIs(t, CheckDescription(d), ErrInvalid, "%q", d)
		c, nodes := cluster(t, grants(1))
		l := testLock()
		l.Description, l.Persist = d, true
		_, err := c.Acquire(context.Background(), l)
		require.ErrorIs(t, err, ErrInvalid, "%q", d)
		require.ErrorContains(t, err, `"x"`)
		_, err = c.AcquireWait(context.Background(), l, Backoff{Min: 1, Max: 1})
		require.ErrorIs(t, err, ErrInvalid, "%q", d)
		require.ErrorContains(t, err, `"x"`)
		require.Empty(t, nodes[0].scripts(), "%q: a node was called", d)
	}
	for _, d := range []string{"", "web-3:4242", "ünïcode/job#7", strings.Repeat("d", MaxDescriptionLen)} {
		require.NoError(t, CheckDescription(d), "%q", d)
	}
}

// TestDescribedTokens: a description starts a token and a waiter id, "<d>@", and is what
// describedBy reads back; every attempt's token of a waiter keeps it.
func TestDescribedTokens(t *testing.T) {
	d := strings.Repeat("d", MaxDescriptionLen)
	token := newToken(d)
	require.Len(t, token, MaxDescriptionLen+1+22)
	require.Equal(t, d, describedBy(token))
	waiter, first := newWaiter("job.7")
	require.Equal(t, waiter+".1", first)
	require.True(t, strings.HasPrefix(waiter, "job.7@"))
	require.Equal(t, "job.7", describedBy(attemptToken(first, waiter, 3)))
	id, ok := WaiterID(attemptToken(first, waiter, 3))
	require.True(t, ok)
	require.Equal(t, waiter, id)
	_, ok = WaiterID(newToken("job.7"))
	require.False(t, ok, "a described token that is not a waiter's reads as one")
	require.Equal(t, "", describedBy(NewToken()))
	require.Equal(t, "", describedBy(ReadersHold))
}
