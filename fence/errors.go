package fence

import (
	"errors"
	"fmt"

	"github.com/go-redlock/redlock/core"
)

// ErrStale means the storage refused a write because its fencing token is older than the
// highest token the resource has seen: the writer no longer holds the lock, and another
// holder has written since. errors.As with a *StaleError gives the tokens.
var ErrStale = errors.New("redlock: stale fencing token")

// ErrCorrupt means a resource's token record holds something this package did not write (a
// Redis record whose "token" field is not 20 decimal digits, or 20 digits above the largest
// uint64). The record is left alone.
var ErrCorrupt = errors.New("redlock: fencing record is not one of package fence's")

// StaleError is the error of a refused write: Token, the write's, is older than Highest, the
// highest the resource has seen. It matches ErrStale under errors.Is.
type StaleError struct {
	Resource string // the resource as the caller named it: a Redis key, or a SQL row's resource
	Token    uint64 // the refused token
	Highest  uint64 // the highest token recorded for the resource
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("redlock: fence %s: token %d is older than %d, the highest written: the writer no longer holds the lock",
		quoted(e.Resource), e.Token, e.Highest)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// invalid returns an error matching redlock.ErrInvalid (core.ErrInvalid).
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: fence: %s", core.ErrInvalid, fmt.Sprintf(format, args...))
}

// quoted returns name quoted for an error message, cut short past 64 bytes.
func quoted(name string) string {
	const most = 64
	if len(name) > most {
		return fmt.Sprintf("%q... (%d bytes)", name[:most], len(name))
	}
	return fmt.Sprintf("%q", name)
}
