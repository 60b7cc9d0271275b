package cli

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// listen opens the address serve or the proxy listens on. An address
// that is taken, not this machine's, or not permitted is a problem of the
// environment, not of the flags: exit 8, with a free port to use instead.
// A malformed address is a usage error.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	var why string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		why = "the address is in use, by another server or another compact-host"
	case errors.Is(err, syscall.EACCES):
		why = "this user may not listen there (ports below 1024 need privileges)"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		why = "the host is not an address of this machine"
	default:
		return nil, usageError{fmt.Errorf("--listen %s: %w; want host:port, e.g. 127.0.0.1:8377", addr, err)}
	}
	return nil, withCode(ExitUnavailable, fmt.Errorf("--listen %s: %s; pick another port%s, or port 0 for any free one", addr, why, freePortHint(addr)))
}

// freePortHint is ", e.g. --listen HOST:PORT" with a port free right now
// on addr's host (or loopback), or "" when none can be found.
func freePortHint(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) == nil && host != "localhost" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return ""
		}
	}
	defer ln.Close()
	return fmt.Sprintf(", e.g. --listen %s", ln.Addr())
}
