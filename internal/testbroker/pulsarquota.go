package testbroker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// PulsarSizeQuota sets public/default's destination_storage backlog
// quota on b to limit bytes with policy, through b's admin REST API; a
// limit of 0 removes the quota.
func PulsarSizeQuota(t testing.TB, b *pulsartest.Broker, limit int, policy string) {
	t.Helper()
	srv := httptest.NewServer(b.AdminHandler())
	defer srv.Close()
	method, body := http.MethodDelete, ""
	if limit > 0 {
		method, body = http.MethodPost, `{"limitSize":`+strconv.Itoa(limit)+`,"limitTime":-1,"policy":"`+policy+`"}`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method,
		srv.URL+"/admin/v2/namespaces/public/default/backlogQuota?backlogQuotaType=destination_storage", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%s backlogQuota: %s", method, resp.Status)
	}
}
