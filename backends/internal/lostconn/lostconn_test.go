package lostconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestLost(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{fmt.Errorf("wrapped: %w", io.EOF), true},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false},
		{context.DeadlineExceeded, false},
		{errors.New("ERR some server error"), false},
		{nil, false},
	} {
		if got := Lost(c.err); got != c.want {
			t.Errorf("Lost(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
