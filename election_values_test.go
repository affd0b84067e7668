package redlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestElectionValueBytes: a leader's value comes back from Leader byte for byte, whatever
// its bytes: 0x00, 0xff, the 7-bit/8-bit boundary, lengths around six bytes, spaces, every
// byte value, and the longest value allowed.
func TestElectionValueBytes(t *testing.T) {
	var every strings.Builder
	for b := range 256 {
		every.WriteByte(byte(b))
	}
	values := map[string]string{
		"empty":         "",
		"zero":          "\x00",
		"zeros":         "\x00\x00\x00\x00\x00\x00\x00",
		"ff":            "\xff\xff\xff\xff\xff\xff\xff",
		"7-bit/8-bit":   "\x7f\x80\x7f\x80",
		"six":           "abcdef",
		"seven":         "abcdefg",
		"spaces":        " a b ",
		"mixed":         "a\x00b\xff c\r\n\xc3\x28é",
		"every-byte":    every.String(),
		"longest-00-ff": strings.Repeat("\x00\xff", core.MaxValueLen/2),
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			nodes, _ := k.nodes(t, 3)
			e := closingClient(t, nodes, redlock.WithNodeTimeout(2*time.Second)).NewElection("bytes")
			ctx := ctxT(t, time.Minute)
			for name, value := range values {
				lease, err := e.Campaign(ctx, value)
				require.NoError(t, err, name)
				got, err := e.Leader(ctx)
				require.NoError(t, err, name)
				assert.True(t, got == value, "%s: Leader returned %q (%d bytes), want %q (%d bytes)", name, got, len(got), value, len(value))
				require.NoError(t, lease.Release(ctx), name)
			}
		})
	}
}
