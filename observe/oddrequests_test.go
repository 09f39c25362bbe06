package observe_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
)

// Guarantee: the handler answers any request, however odd its method,
// path, query or headers, with a status and never a panic: only GET and
// HEAD reach the endpoints (any other method is 405 naming them in Allow),
// a path it does not serve is 404, a path that is not clean is redirected
// to its clean form, and query strings and headers are ignored (an
// endpoint still answers 200, /stats still with its JSON snapshot).
func TestTheHandlerAnswersOddRequestsWithAStatusNotAPanic(t *testing.T) {
	h := observe.New(observe.Options{}).Handler(nil)
	long := "/" + strings.Repeat("a", 64<<10)
	for _, c := range []struct {
		method, path, query string
		header              http.Header
		want                int
	}{
		{method: http.MethodPost, path: "/stats", want: http.StatusMethodNotAllowed},
		{method: http.MethodDelete, path: "/metrics", want: http.StatusMethodNotAllowed},
		{method: http.MethodPut, path: "/healthz", want: http.StatusMethodNotAllowed},
		{method: http.MethodPatch, path: "/readyz", want: http.StatusMethodNotAllowed},
		{method: http.MethodOptions, path: "/dashboard", want: http.StatusMethodNotAllowed},
		{method: "get", path: "/stats", want: http.StatusMethodNotAllowed},
		{method: "BREW\x00", path: "/stats", want: http.StatusMethodNotAllowed},
		{method: http.MethodHead, path: "/healthz", want: http.StatusOK},
		{method: http.MethodGet, path: "/stats", query: "x=%zz&y=\xff&&=&" + strings.Repeat("k=v&", 1000), want: http.StatusOK},
		{method: http.MethodGet, path: "/metrics", query: "name[]=%00", header: http.Header{"Accept": {"\xff;q=x, */*;version=-1"}}, want: http.StatusOK},
		{method: http.MethodGet, path: "/metrics", header: http.Header{"Accept-Encoding": {"gzip;q=\xff, zstd, br;q=2"}}, want: http.StatusOK},
		{method: http.MethodGet, path: "/readyz", header: http.Header{"X-Dup": make([]string, 1000)}, want: http.StatusOK},
		{method: http.MethodGet, path: "/healthz/", want: http.StatusNotFound},
		{method: http.MethodGet, path: "/STATS", want: http.StatusNotFound},
		{method: http.MethodGet, path: "/stats\x00", want: http.StatusNotFound},
		{method: http.MethodGet, path: "/\xff\xfe", want: http.StatusNotFound},
		{method: http.MethodGet, path: long, want: http.StatusNotFound},
		{method: http.MethodGet, path: "/stats/../stats", want: http.StatusTemporaryRedirect},
		{method: http.MethodGet, path: "//stats", want: http.StatusTemporaryRedirect},
		{method: http.MethodGet, path: "", want: http.StatusTemporaryRedirect},
	} {
		name := fmt.Sprintf("%.20q %.40q?%.20q", c.method, c.path, c.query)
		r := &http.Request{Method: c.method, URL: &url.URL{Path: c.path, RawQuery: c.query}, Header: c.header,
			Host: "example.com", RequestURI: c.path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		if r.Header == nil {
			r.Header = http.Header{}
		}
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panicked: %v", name, p)
				}
			}()
			h.ServeHTTP(w, r)
		}()
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d", name, w.Code, c.want)
			continue
		}
		if allow := w.Header().Get("Allow"); c.want == http.StatusMethodNotAllowed && allow != "GET, HEAD" {
			t.Errorf("%s: Allow %q, want %q", name, allow, "GET, HEAD")
		}
		if c.path == "/stats" && c.want == http.StatusOK {
			var snap observe.Snapshot
			if err := json.Unmarshal(w.Body.Bytes(), &snap); err != nil {
				t.Errorf("%s: body %.100q is not a JSON snapshot: %v", name, w.Body.String(), err)
			}
		}
	}
}
