package rueidis_test

import (
	"testing"

	"github.com/go-redlock/redlock/backends/internal/backendtest"
	rlrueidis "github.com/go-redlock/redlock/backends/rueidis"
)

// TestDial: a Client made by redlock.Dial over rlrueidis.Dial locks, and its Close closes the
// clients Dial's Lazy nodes made; a URL's password is used; a bad address is refused.
func TestDial(t *testing.T) { backendtest.Dial(t, rlrueidis.Dial) }
