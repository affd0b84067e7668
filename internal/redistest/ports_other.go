//go:build !unix

package redistest

import (
	"net"
	"os"
)

// reservePort returns a port that was free on 127.0.0.1 a moment ago. Without flock, it
// reserves nothing (the file is nil).
func reservePort() (int, *os.File, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil, nil
}
