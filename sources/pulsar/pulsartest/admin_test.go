package pulsartest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// adminDo sends method path with body to srv and returns the status and
// the body of the answer.
func adminDo(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Guarantee: the admin REST API reports a namespace's backlog quotas and
// subscription expiration time as a real broker does (paths, JSON shapes,
// 204 for an unset expiration), per namespace, after they are set or
// removed through it; a malformed request is refused with 400 and
// {"reason"}.
func TestAdminReportsTheNamespacePoliciesSetThroughIt(t *testing.T) {
	srv := httptest.NewServer(startBroker(t).AdminHandler())
	defer srv.Close()
	const ns = "/admin/v2/namespaces/acme/orders/"

	if code, body := adminDo(t, srv, http.MethodGet, ns+"backlogQuotaMap", ""); code != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("backlogQuotaMap of a namespace without quotas: %d %q, want 200 {}", code, body)
	}
	if code, body := adminDo(t, srv, http.MethodGet, ns+"subscriptionExpirationTime", ""); code != http.StatusNoContent || body != "" {
		t.Errorf("subscriptionExpirationTime unset: %d %q, want 204 and no body", code, body)
	}
	if code, body := adminDo(t, srv, http.MethodPost, ns+"backlogQuota?backlogQuotaType=destination_storage",
		`{"limitSize":1048576,"limitTime":-1,"policy":"consumer_backlog_eviction"}`); code != http.StatusNoContent {
		t.Fatalf("setting a backlog quota: %d %s", code, body)
	}
	if code, body := adminDo(t, srv, http.MethodPost, ns+"backlogQuota?backlogQuotaType=message_age",
		`{"limitSize":-1,"limitTime":3600,"policy":"producer_request_hold"}`); code != http.StatusNoContent {
		t.Fatalf("setting a backlog quota: %d %s", code, body)
	}
	if code, body := adminDo(t, srv, http.MethodPost, ns+"subscriptionExpirationTime", "60"); code != http.StatusNoContent {
		t.Fatalf("setting the subscription expiration time: %d %s", code, body)
	}
	code, body := adminDo(t, srv, http.MethodGet, ns+"backlogQuotaMap", "")
	var quotas map[string]BacklogQuota
	if err := json.Unmarshal([]byte(body), &quotas); code != http.StatusOK || err != nil {
		t.Fatalf("backlogQuotaMap: %d %q (%v)", code, body, err)
	}
	want := map[string]BacklogQuota{
		QuotaDestinationStorage: {LimitSize: 1048576, LimitTime: -1, Policy: "consumer_backlog_eviction"},
		QuotaMessageAge:         {LimitSize: -1, LimitTime: 3600, Policy: "producer_request_hold"},
	}
	if len(quotas) != len(want) || quotas[QuotaDestinationStorage] != want[QuotaDestinationStorage] || quotas[QuotaMessageAge] != want[QuotaMessageAge] {
		t.Errorf("backlogQuotaMap = %v, want %v", quotas, want)
	}
	if code, body := adminDo(t, srv, http.MethodGet, ns+"subscriptionExpirationTime", ""); code != http.StatusOK || strings.TrimSpace(body) != "60" {
		t.Errorf("subscriptionExpirationTime: %d %q, want 200 60", code, body)
	}
	if code, body := adminDo(t, srv, http.MethodGet, "/admin/v2/namespaces/acme/other/backlogQuotaMap", ""); code != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("backlogQuotaMap of another namespace: %d %q, want 200 {}", code, body)
	}

	adminDo(t, srv, http.MethodDelete, ns+"backlogQuota?backlogQuotaType=destination_storage", "")
	adminDo(t, srv, http.MethodDelete, ns+"subscriptionExpirationTime", "")
	if _, body := adminDo(t, srv, http.MethodGet, ns+"backlogQuotaMap", ""); strings.Contains(body, QuotaDestinationStorage) || !strings.Contains(body, QuotaMessageAge) {
		t.Errorf("backlogQuotaMap after removing the destination_storage quota: %q", body)
	}
	if code, _ := adminDo(t, srv, http.MethodGet, ns+"subscriptionExpirationTime", ""); code != http.StatusNoContent {
		t.Errorf("subscriptionExpirationTime after its removal: %d, want 204", code)
	}

	for _, bad := range []struct{ method, path, body string }{
		{http.MethodPost, ns + "backlogQuota?backlogQuotaType=size", `{"policy":"producer_exception"}`},
		{http.MethodPost, ns + "backlogQuota", `{"policy":"drop_everything"}`},
		{http.MethodPost, ns + "backlogQuota", `not json`},
		{http.MethodPost, ns + "subscriptionExpirationTime", `-5`},
	} {
		code, body := adminDo(t, srv, bad.method, bad.path, bad.body)
		var reason struct{ Reason string }
		if err := json.Unmarshal([]byte(body), &reason); code != http.StatusBadRequest || err != nil || reason.Reason == "" {
			t.Errorf("%s %s %s: %d %q, want 400 with a reason", bad.method, bad.path, bad.body, code, body)
		}
	}
	if code, _ := adminDo(t, srv, http.MethodGet, "/admin/v2/namespaces/acme/orders/retention", ""); code != http.StatusNotFound {
		t.Errorf("a policy it does not serve: %d, want 404", code)
	}
	if code, _ := adminDo(t, srv, http.MethodPut, ns+"backlogQuotaMap", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT backlogQuotaMap: %d, want 405", code)
	}
}

// A backlogQuota POST or DELETE without backlogQuotaType applies to the
// destination_storage quota, as a real broker defaults it.
func TestAdminBacklogQuotaTypeDefaultsToDestinationStorage(t *testing.T) {
	srv := httptest.NewServer(startBroker(t).AdminHandler())
	defer srv.Close()
	const ns = "/admin/v2/namespaces/acme/orders/"
	if code, body := adminDo(t, srv, http.MethodPost, ns+"backlogQuota",
		`{"limitSize":2048,"limitTime":-1,"policy":"producer_exception"}`); code != http.StatusNoContent {
		t.Fatalf("setting a backlog quota without a type: %d %s", code, body)
	}
	_, body := adminDo(t, srv, http.MethodGet, ns+"backlogQuotaMap", "")
	var quotas map[string]BacklogQuota
	if err := json.Unmarshal([]byte(body), &quotas); err != nil {
		t.Fatal(err)
	}
	if want := (BacklogQuota{LimitSize: 2048, LimitTime: -1, Policy: "producer_exception"}); len(quotas) != 1 || quotas[QuotaDestinationStorage] != want {
		t.Fatalf("backlogQuotaMap = %v, want only %s: %v", quotas, QuotaDestinationStorage, want)
	}
	if code, body := adminDo(t, srv, http.MethodDelete, ns+"backlogQuota", ""); code != http.StatusNoContent {
		t.Fatalf("removing a backlog quota without a type: %d %s", code, body)
	}
	if _, body := adminDo(t, srv, http.MethodGet, ns+"backlogQuotaMap", ""); strings.TrimSpace(body) != "{}" {
		t.Fatalf("backlogQuotaMap after the removal: %q, want {}", body)
	}
}
