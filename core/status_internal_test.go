package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStatusRefusesABadReply(t *testing.T) {
	free := []string{"1000", "", "", "-2", "", "", "-2", "", "0", "0", "0", "0"}
	s, k, err := parseStatus(free, 0)
	require.NoError(t, err)
	require.Zero(t, k)
	require.Nil(t, s.Lock)
	for _, bad := range [][]string{
		free[:5],                    // short
		append(free[:11:11], "5"),   // a list longer than the reply
		append(free[:1:1], free...), // values left over
		append([]string{"x"}, free[1:]...),
	} {
		_, _, err := parseStatus(bad, 0)
		require.Error(t, err, "%q", bad)
	}
}

func TestParseStatusQueue(t *testing.T) {
	// At server time 1000 ms: w1 holds the lock (its token w1.2), w2 and r3 wait (their
	// records: kind and channel), w4's place lapsed.
	reply := []string{"1000", "abc", "w1.2", "5000", "17", "", "-2", "",
		"8", "w1", "1", "w2", "2", "r3", "3", "w4", "4",
		"8", "w1", "6000", "w2", "1500", "r3", "1400", "w4", "900",
		"4", "r3", "r q:{x}:released:r3", "w2", "w q:{x}:released:w2",
		"0"}
	s, _, err := parseStatus(reply, 0)
	require.NoError(t, err)
	require.Equal(t, &LockKey{Owner: "w1.2", TTL: 5 * time.Second}, s.Lock)
	require.Equal(t, uint64(17), s.Fence)
	require.Equal(t, []Waiter{{ID: "w2", TTL: 500 * time.Millisecond}, {ID: "r3", Reader: true, TTL: 400 * time.Millisecond}}, s.Queue)
	require.Equal(t, "abc", s.server)
}
