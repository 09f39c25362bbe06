package testnet

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// OpenFiles returns how many file descriptors this process holds open.
func OpenFiles(t testing.TB) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// ConnsTo returns how many TCP sockets this process holds open whose
// remote end is one of addrs (host:port): the client side of its
// connections to those addresses, whatever their state (a connection the
// peer closed but this process did not still counts).
func ConnsTo(t testing.TB, addrs ...string) int {
	t.Helper()
	want := map[netip.AddrPort]bool{}
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			tcp, rerr := net.ResolveTCPAddr("tcp", a)
			if rerr != nil {
				t.Fatalf("address %q: %v", a, rerr)
			}
			ap = tcp.AddrPort()
		}
		want[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
	}
	inodes := socketInodes(t)
	n := 0
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		n += countRemote(t, table, want, inodes)
	}
	return n
}

// socketInodes returns the inodes of the sockets this process holds open.
func socketInodes(t testing.TB) map[string]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		// A descriptor closed since the listing has no link any more.
		link, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return inodes
}

// countRemote counts the lines of a /proc/net/tcp table whose remote
// address is in want and whose inode is in inodes.
func countRemote(t testing.TB, table string, want map[netip.AddrPort]bool, inodes map[string]bool) int {
	t.Helper()
	f, err := os.Open(table)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !inodes[fields[9]] {
			continue
		}
		remote, err := parseProcAddr(fields[2])
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if want[remote] {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// parseProcAddr parses an address of /proc/net/tcp or tcp6: the IP in hex,
// each 32-bit word in host (little-endian) order, a colon, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q has no port", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad IP", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad port", s)
	}
	for w := 0; w < len(raw); w += 4 {
		raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// SettlesAtMost waits, up to bound, for count to return at most want:
// connections and files close asynchronously. It fails t with what was
// counted and the last count otherwise.
func SettlesAtMost(t testing.TB, bound time.Duration, what string, want int, count func() int) {
	t.Helper()
	last := 0
	wait.Within(t, bound, fmt.Sprintf("at most %d %s", want, what), func() bool {
		last = count()
		return last <= want
	}, func() string { return fmt.Sprintf("%d still open", last) })
}
