// Package loopback keeps what the project listens on local unless the
// user names a host.
package loopback

import "net"

// Addr returns the address to listen on for addr: addr itself, or, when
// it names a port but no host (":8080"), that port on 127.0.0.1. Go's
// net.Listen takes an empty host as every interface; the project's
// servers and test brokers take it as the loopback interface, so that
// they are reachable from elsewhere only when a host says so
// ("0.0.0.0:8080"). An addr that does not parse is returned as it is,
// for the listener to refuse.
func Addr(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
