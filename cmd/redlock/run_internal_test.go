package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWarnLoggerDropsAbstentions: redlock's logger drops the library's line about a node
// that abstains under the restart guard (redlock says it with its flag's name), and passes
// on the rest, the library's "still waiting" warning among them.
func TestWarnLoggerDropsAbstentions(t *testing.T) {
	var b bytes.Buffer
	log := warnLogger(&b, func(err error) string { return err.Error() })
	log.Warn("redlock: node started less than the restart guard ago, and abstains for 29s more: "+
		"locks that need its vote wait for it (WithRestartGuard sets the guard)", "node", "127.0.0.1:6379", "left", 29*time.Second)
	log.With("lock", "x").Warn("redlock: node abstains under the restart guard", "node", "127.0.0.1:6379")
	log.Warn("redlock: still waiting for the lock", "name", "x", "error", errors.New("no quorum"))
	out := b.String()
	if strings.Contains(out, "abstains") || strings.Contains(out, "WithRestartGuard") {
		t.Errorf("the library's abstention went through:\n%s", out)
	}
	if !strings.Contains(out, "still waiting for the lock") {
		t.Errorf("another warning was dropped:\n%s", out)
	}
}
