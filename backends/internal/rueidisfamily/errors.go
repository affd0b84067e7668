package rueidisfamily

import (
	"fmt"
	"strings"

	"github.com/go-redlock/redlock/core"
)

// closed returns err, wrapped to match core.ErrClosed as well when it says the client was
// closed, so that core gives up on the node at once instead of retrying it.
func closed(d Driver, err error) error {
	if d.Closing(err) {
		return fmt.Errorf("%w: %w", core.ErrClosed, err)
	}
	return err
}

// serverError returns a server's error reply with the message the server sent: the driver
// drops the "ERR " that starts most replies (its error's Error gives "Error running script
// ..." for "ERR Error running script ..."), and core.Permanent knows a reply by its start. A
// message whose first word is not an upper-case error code (WRONGTYPE, NOSCRIPT,
// CROSSSLOT...) had that "ERR " in front. The result unwraps to the driver's error; any other
// error, and a nil reply, is returned as it is.
func serverError(d Driver, err error) error {
	msg, ok := d.Reply(err)
	if !ok {
		return err
	}
	code, _, _ := strings.Cut(msg, " ")
	if code != "" && strings.ToUpper(code) == code {
		return err
	}
	return &errReply{msg: "ERR " + msg, err: err}
}

// errReply is a server's error reply whose "ERR " the driver dropped, with it put back.
type errReply struct {
	msg string
	err error // the driver's (*rueidis.RedisError, *valkey.ValkeyError)
}

func (e *errReply) Error() string { return e.msg }

func (e *errReply) Unwrap() error { return e.err }
