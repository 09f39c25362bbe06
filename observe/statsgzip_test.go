package observe_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
)

// getStats reads /stats from srv with acceptEncoding as the request's
// Accept-Encoding ("" for none), without the transport's own
// decompression, and returns the answer's Content-Encoding, the bytes
// sent and the snapshot they hold (without its time, which differs from
// one request to the next).
func getStats(t *testing.T, srv *httptest.Server, acceptEncoding string) (encoding string, sent int, snap map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+"/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /stats (Accept-Encoding %q): %s %s", acceptEncoding, resp.Status, raw)
	}
	body := raw
	encoding = resp.Header.Get("Content-Encoding")
	if encoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("Content-Encoding gzip, but the body is not: %v", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("Content-Encoding gzip, but the body is not: %v", err)
		}
	}
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatalf("the body (Content-Encoding %q) is not JSON: %v", encoding, err)
	}
	delete(snap, "time")
	return encoding, len(raw), snap
}

// Guarantee: /stats of a large deployment goes out gzip-compressed to a
// client that accepts it, much smaller and holding the same snapshot,
// and uncompressed to one that does not (no Accept-Encoding, gzip;q=0,
// another coding); a small /stats goes out uncompressed.
func TestStatsOfALargeDeploymentGoOutCompressedToClientsThatAcceptGzip(t *testing.T) {
	obs, _, _, _ := largeDeployment(t, 400)
	srv := httptest.NewServer(obs.Handler(nil))
	t.Cleanup(srv.Close)

	_, plainSize, plain := getStats(t, srv, "")
	for _, accept := range []string{"gzip", "gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8", "*"} {
		enc, size, snap := getStats(t, srv, accept)
		if enc != "gzip" {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want gzip", accept, enc)
		}
		if size*4 > plainSize {
			t.Errorf("Accept-Encoding %q: %d bytes sent, want under a quarter of the %d uncompressed", accept, size, plainSize)
		}
		if !reflect.DeepEqual(snap, plain) {
			t.Fatalf("Accept-Encoding %q: the compressed snapshot differs from the uncompressed one", accept)
		}
	}
	for _, accept := range []string{"gzip;q=0", "identity", "br", "gzip; q=0.0, br"} {
		if enc, size, snap := getStats(t, srv, accept); enc != "" || !reflect.DeepEqual(snap, plain) {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q (%d bytes), want the snapshot uncompressed (%d bytes)", accept, enc, size, plainSize)
		}
	}

	small := observe.New(observe.Options{})
	t.Cleanup(func() { _ = small.Close(context.Background()) })
	smallSrv := httptest.NewServer(small.Handler(nil))
	t.Cleanup(smallSrv.Close)
	if enc, _, _ := getStats(t, smallSrv, "gzip"); enc != "" {
		t.Errorf("a /stats of nothing added: Content-Encoding %q, want none", enc)
	}
}
