package observe_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/observe"
)

// Guarantee: Close gives back the Server's listener and every connection
// it accepted: a client that scraped and keeps its keep-alive connection
// (its transport never closes it) sees that connection closed by the
// server, and many rounds of Serve, scrape and Close leave the process no
// more open files than before.
func TestCloseClosesTheListenerAndTheKeptConnections(t *testing.T) {
	const rounds = 20
	obs := observe.New(observe.Options{Logger: quiet})
	defer obs.Close(context.Background())
	// Kept open: only the server's Close can end its connections.
	client := &http.Client{Transport: &http.Transport{}}
	files := testnet.OpenFiles(t)
	for i := range rounds {
		s := startServer(t, obs, shortClose())
		for _, path := range []string{"/metrics", "/healthz"} {
			resp, err := client.Get("http://" + s.Addr() + path)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("%s: %s (close %v), want 200 on a kept connection", path, resp.Status, resp.Close)
			}
		}
		if n := testnet.ConnsTo(t, s.Addr()); n != 1 {
			t.Fatalf("the client holds %d connections to the server, want its 1 kept", n)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("client connections to the server closed %d", i+1), 0,
			func() int { return testnet.ConnsTo(t, s.Addr()) })
		testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("open files more than before, after %d servers closed", i+1), 0,
			func() int { return testnet.OpenFiles(t) - files })
	}
}
