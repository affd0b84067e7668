package core

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atItsDeadline is a node whose driver, as go-redis with ContextTimeoutEnabled, sets its
// connection's deadline to the call's, and returns the read's timeout once that deadline
// passed: at the moment the call's context would end, maybe before its timer ran.
func atItsDeadline(ctx context.Context, _ *Script) ([]int64, error) {
	deadline, _ := ctx.Deadline()
	for time.Now().Before(deadline) {
	}
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// TestTimeoutAtTheDeadlineIsTheNodeTimeout: a driver's timeout that comes at the call's
// deadline, before the call's context has marked itself done, is the node timeout
// (ErrNodeTimeout, naming it), as it is when the context's timer ran first.
func TestTimeoutAtTheDeadlineIsTheNodeTimeout(t *testing.T) {
	for range 20 {
		c, _ := cluster(t, atItsDeadline, atItsDeadline, atItsDeadline)
		l := testLock()
		l.NodeTimeout = 5 * time.Millisecond
		_, err := c.Acquire(context.Background(), l)
		var qe *QuorumError
		require.ErrorAs(t, err, &qe)
		for _, e := range qe.Errs {
			assert.True(t, errors.Is(e.Err, ErrNodeTimeout), "%s: %v", e.Node, e.Err)
		}
	}
}
