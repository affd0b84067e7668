package redlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redlock/redlock/core"
)

// notices returns the options that make a Client's Cluster say, on logger (slog.Default()
// if nil, read when it says it), what its nodes show of themselves, once per node: a node
// that cannot apply the restart guard, one that cannot be told apart from the others, and
// one that fails with an error no retry can fix; and a node that abstains under the guard,
// at its first abstention since it last granted.
func notices(logger *slog.Logger) []core.ClusterOption {
	log := func() *slog.Logger { return noticeLogger(logger) }
	return []core.ClusterOption{
		core.OnUnguarded(func(node string) {
			log().Warn("redlock: node cannot report its uptime, so the restart guard is off for it", "node", node)
		}),
		core.OnUnidentified(func(node string) {
			log().Warn("redlock: node's server refuses INFO, so it cannot be checked to be a server of its own (one server, one vote): "+
				"grant the command (ACL SETUSER <user> +info)", "node", node)
		}),
		core.OnAbstained(func(node string, left time.Duration) {
			secs := int64((left + time.Second - 1) / time.Second)
			log().Warn(fmt.Sprintf("redlock: node started less than the restart guard ago, and abstains for %ds more: "+
				"locks that need its vote wait for it (WithRestartGuard sets the guard)", secs), "node", node, "left", left)
		}),
		core.OnFailedForGood(func(node string, err error) {
			log().Warn("redlock: node fails with an error that no retry can fix", "node", node, "error", err)
		}),
	}
}

// noticeLogger returns logger, or slog.Default() if it is nil.
func noticeLogger(logger *slog.Logger) *slog.Logger {
	if logger != nil {
		return logger
	}
	return slog.Default()
}
