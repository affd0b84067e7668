package redistest

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// bindTries bounds how often a miniredis start on a reserved port is tried while the port
// reads as in use: a bind there fails now and then for a few milliseconds while many test
// processes start and stop servers, though no server holds the port.
const bindTries = 100

// StartMiniredis starts a miniredis on a port reserved for the test (see ReservePort), so
// that the test can close it and start it again on the same address (RestartMiniredis),
// and closes it when the test ends. t.Fatalf if it cannot start.
func StartMiniredis(t testing.TB) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	addr := fmt.Sprintf("127.0.0.1:%d", ReservePort(t))
	if err := retryBind(func() error { return m.StartAddr(addr) }); err != nil {
		t.Fatalf("redistest: start miniredis on %s: %v", addr, err)
	}
	t.Cleanup(m.Close)
	return m
}

// RestartMiniredis starts m again on its address after m.Close, as a restarted server
// comes back: empty of connections, with its data. t.Fatalf if it cannot.
func RestartMiniredis(t testing.TB, m *miniredis.Miniredis) {
	t.Helper()
	if err := retryBind(m.Restart); err != nil {
		t.Fatalf("redistest: restart miniredis on %s: %v", m.Addr(), err)
	}
}

// retryBind runs start until it does not fail with EADDRINUSE, at most bindTries times,
// 10 ms apart.
func retryBind(start func() error) error {
	var err error
	for range bindTries {
		if err = start(); !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}
