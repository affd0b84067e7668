package redigo_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	"github.com/go-redlock/redlock/backends/redigo"
)

// TestDial: a Client made by redlock.Dial over redigo.Dial locks, and its Close closes the
// pools Dial made; a URL's password is used; a bad address is refused.
func TestDial(t *testing.T) { backendtest.Dial(t, redigo.Dial, "unix:///tmp/redis.sock") }
