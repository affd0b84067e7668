//go:build unix

package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Servers' ports are drawn from [portLow, portHigh): below Linux's ephemeral range
// (32768-60999 by default), so that no connection's local port can take one, and each is
// reserved by a lock file (flock) for as long as its Server lives, up or down. So the test
// processes that `go test` runs at once never start a server on a port another one's
// Server holds while its process is killed, which Restart binds again. The (empty) lock
// files stay in the temporary directory: removing one could let two processes lock two
// files of one port.
const (
	portLow, portHigh = 20000, 32000
	portTries         = 200
)

// reservePort returns a port that no other Server holds and that was free on 127.0.0.1 a
// moment ago, with the lock file that reserves it: closing the file frees it.
func reservePort() (int, *os.File, error) {
	dir := filepath.Join(os.TempDir(), "redistest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, nil, err
	}
	for range portTries {
		port := portLow + rand.IntN(portHigh-portLow)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // another Server holds it
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close() // in use by something else
			continue
		}
		ln.Close()
		return port, f, nil
	}
	return 0, nil, fmt.Errorf("redistest: no free port in %d-%d after %d tries", portLow, portHigh-1, portTries)
}
