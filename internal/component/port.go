package component

import (
	"fmt"
	"net"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a child
// or server that must be told its port before it starts.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
