package testnet_test

import (
	"net"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testnet"
)

// Guarantee: ConnsTo counts this process's open connections to an address,
// over IPv4 and IPv6, and not those to another address; OpenFiles counts
// each of them as a descriptor.
func TestConnsToCountsTheOpenConnectionsToAnAddress(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			host := map[string]string{"tcp4": "127.0.0.1", "tcp6": "[::1]"}[network]
			ln, err := net.Listen(network, host+":0")
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer func() { _ = ln.Close() }()
			addr, other := ln.Addr().String(), testnet.SilentListener(t)
			files := testnet.OpenFiles(t)
			var conns []net.Conn
			for range 3 {
				c, err := net.Dial(network, addr)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			if c, err := net.Dial("tcp", other); err == nil {
				defer func() { _ = c.Close() }()
			}
			if n := testnet.ConnsTo(t, addr); n != 3 {
				t.Fatalf("%d connections to %s counted, want 3", n, addr)
			}
			if n := testnet.OpenFiles(t) - files; n < 3 {
				t.Fatalf("%d more open files after 3 connections, want at least 3", n)
			}
			for _, c := range conns {
				_ = c.Close()
			}
			testnet.SettlesAtMost(t, 5*time.Second, "connections to "+addr, 0, func() int { return testnet.ConnsTo(t, addr) })
		})
	}
}
