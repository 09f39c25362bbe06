package monitor

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/observe"
)

// limits bound what one connection to the server may hold, and how long
// Close waits for the connections to end.
type limits struct {
	// readHeader bounds reading a request's header, from the moment the
	// server starts waiting for it.
	readHeader time.Duration
	// read bounds reading a whole request, header and body. The
	// endpoints take no body: this only bounds a client that sends one
	// slowly (the server reads what the handler left, up to 256 KiB, to
	// keep the connection).
	read time.Duration
	// write bounds a response, from the end of its request's header to
	// its last byte written: the handler's work included.
	write time.Duration
	// idle is how long a keep-alive connection may wait for its next
	// request.
	idle time.Duration
	// maxHeaderBytes bounds a request's header.
	maxHeaderBytes int
	// shutdown is how long Close lets the requests being handled finish
	// (http.Server.Shutdown) before it closes every connection
	// (http.Server.Close).
	shutdown time.Duration
	// closeWait is how long Close then waits for the handlers of the
	// connections it closed to return.
	closeWait time.Duration
}

// serverLimits are the limits of every example's server, chosen for what
// observe's handler serves:
//
//   - a /metrics scrape waits up to twice observe.Options.StatsTimeout
//     (the examples keep observe.DefaultStatsTimeout, 5 s) for the
//     gathering, /stats and the checks up to StatsTimeout: write leaves
//     10 s beyond the longest of them to write the answer;
//   - the dashboard polls /stats every second and Prometheus
//     (examples/prometheus) scrapes every second, on keep-alive
//     connections: idle keeps those for 30 s, well past either period;
//   - no endpoint takes a body or needs more than a browser's headers
//     (cookies included): read bounds a body sent anyway to 10 s, and
//     maxHeaderBytes a header to 64 KiB;
//   - Close returns at most shutdown+closeWait, 2 s, after the linger.
var serverLimits = limits{
	readHeader:     5 * time.Second,
	read:           10 * time.Second,
	write:          2*observe.DefaultStatsTimeout + 10*time.Second,
	idle:           30 * time.Second,
	maxHeaderBytes: 64 << 10,
	shutdown:       time.Second,
	closeWait:      time.Second,
}

// connCount counts the server's open connections, through its ConnState
// hook, so that Close can wait until the last one has ended.
type connCount struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n falls to 0, once allClosed asked
}

// hook is the server's ConnState.
func (c *connCount) hook(_ net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew:
		c.n++
	case http.StateClosed, http.StateHijacked:
		c.n--
		if c.n == 0 && c.zero != nil {
			close(c.zero)
			c.zero = nil
		}
	}
}

// open returns the number of open connections.
func (c *connCount) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// allClosed returns a channel closed once no connection is open. Call it
// once the server accepts no more connections (Serve has returned).
func (c *connCount) allClosed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n == 0 {
		close(ch)
	} else {
		c.zero = ch
	}
	return ch
}
