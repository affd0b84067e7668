package valkey_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlvalkey "github.com/go-redlock/redlock/backends/valkey"
	"github.com/go-redlock/redlock/core"
	"github.com/go-redlock/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// TestDial: a Client made by redlock.Dial over rlvalkey.Dial locks, and its Close closes the
// clients Dial's Lazy nodes made; a URL's password is used; a bad address is refused.
func TestDial(t *testing.T) { backendtest.Dial(t, rlvalkey.Dial) }

// TestDialValkeyURL: Dial reads valkey:// URLs, with a password, as it reads redis:// ones.
func TestDialValkeyURL(t *testing.T) {
	s := redistest.Start(t)
	_, err := s.Do("CONFIG", "SET", "requirepass", "s3cret")
	require.NoError(t, err)
	n, err := rlvalkey.Dial("valkey://:s3cret@" + s.Addr())
	require.NoError(t, err)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := n.Eval(ctx, core.NewScript("one", "return {1}"), []string{"k"})
	require.NoError(t, err, "the URL's password is not sent")
	require.Equal(t, []int64{1}, got)
}
