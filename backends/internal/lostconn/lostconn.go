// Package lostconn tells a call whose connection broke under it from the other failures,
// for backends whose driver does not retry such a call itself.
package lostconn

import (
	"errors"
	"io"
	"syscall"
)

// Lost reports whether err says that the connection broke while the call was under way:
// the peer reset or closed it (ECONNRESET, EOF), or a write found it broken (EPIPE). The
// server may or may not have run the command. A timeout, a refused connection and a
// server's error reply are not: a retry would not find them otherwise, or the server
// answered.
func Lost(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE)
}
