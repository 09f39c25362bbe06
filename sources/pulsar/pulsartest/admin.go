package pulsartest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// BacklogQuota is a namespace's backlog quota of one type, with the JSON
// names of Pulsar's admin REST API (pulsaradmin's utils.BacklogQuota).
type BacklogQuota struct {
	// LimitSize is the most bytes a subscription's backlog may hold; -1
	// or 0 for no size limit.
	LimitSize int64 `json:"limitSize"`
	// LimitTime is the age in seconds of the oldest message a
	// subscription's backlog may hold; -1 or 0 for no time limit.
	LimitTime int64 `json:"limitTime"`
	// Policy is what the broker does over the quota:
	// "producer_request_hold", "producer_exception" or
	// "consumer_backlog_eviction".
	Policy string `json:"policy"`
}

// The backlog quota types of Pulsar's admin REST API.
const (
	// QuotaDestinationStorage is a quota on a backlog's size.
	QuotaDestinationStorage = "destination_storage"
	// QuotaMessageAge is a quota on the age of a backlog's oldest message.
	QuotaMessageAge = "message_age"
)

// adminPolicies are the namespace policies the admin REST API of a
// Broker stores, by "tenant/namespace". The zero value is ready.
type adminPolicies struct {
	mu sync.Mutex
	ns map[string]*nsPolicies
	// enforced is whether a namespace has a quota the broker enforces: a
	// destination_storage quota with a size limit or a message_age quota
	// with a time limit.
	enforced atomic.Bool
}

// nsPolicies are the policies of one namespace.
type nsPolicies struct {
	backlogQuotas map[string]BacklogQuota
	// expiryMinutes is subscriptionExpirationTime; nil when unset.
	expiryMinutes *int
}

// AdminHandler serves the part of Pulsar's admin REST API (v2) that reads
// and sets the namespace policies which evict unacknowledged messages:
//
//	GET    /admin/v2/namespaces/{tenant}/{namespace}/backlogQuotaMap
//	POST   /admin/v2/namespaces/{tenant}/{namespace}/backlogQuota?backlogQuotaType=destination_storage|message_age
//	DELETE /admin/v2/namespaces/{tenant}/{namespace}/backlogQuota?backlogQuotaType=…
//	GET    /admin/v2/namespaces/{tenant}/{namespace}/subscriptionExpirationTime
//	POST   /admin/v2/namespaces/{tenant}/{namespace}/subscriptionExpirationTime
//	DELETE /admin/v2/namespaces/{tenant}/{namespace}/subscriptionExpirationTime
//
// with the JSON bodies of a real broker: backlogQuotaMap answers an object
// of BacklogQuota by quota type ({} when none is set), a backlogQuota POST
// takes a BacklogQuota (its type defaults to destination_storage), and
// subscriptionExpirationTime is a number of minutes (a GET answers 204 No
// Content when it is unset). Errors answer {"reason": "…"} with 400, 404
// or 405. Every namespace exists. The broker stores these policies and
// reports them. It enforces the size limit of a destination_storage quota
// and the time limit of a message_age quota as a real broker does: over
// either, a producer_request_hold or producer_exception quota closes the
// topic's producers and refuses new ones
// (ProducerBlockedQuotaExceededError or
// ProducerBlockedQuotaExceededException) until the backlog is back under
// the quota, and consumer_backlog_eviction skips a subscription's oldest
// messages (see Broker.CheckBacklogQuotas). It expires no subscription.
// Serve it with net/http/httptest; pulsaradmin's WebServiceURL is then
// the server's URL.
func (b *Broker) AdminHandler() http.Handler {
	return http.HandlerFunc(b.serveAdmin)
}

func (b *Broker) serveAdmin(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/admin/v2/namespaces/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		adminError(w, http.StatusNotFound, "Unknown path: "+r.URL.Path)
		return
	}
	ns, policy := parts[0]+"/"+parts[1], parts[2]
	a := &b.admin
	switch {
	case policy == "backlogQuotaMap" && r.Method == http.MethodGet:
		a.mu.Lock()
		out := map[string]BacklogQuota{}
		if p := a.ns[ns]; p != nil {
			for k, q := range p.backlogQuotas {
				out[k] = q
			}
		}
		a.mu.Unlock()
		adminJSON(w, out)
	case policy == "backlogQuota" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		kind := r.URL.Query().Get("backlogQuotaType")
		if kind == "" {
			kind = QuotaDestinationStorage
		}
		if kind != QuotaDestinationStorage && kind != QuotaMessageAge {
			adminError(w, http.StatusBadRequest, fmt.Sprintf("Invalid backlog quota type: %s", kind))
			return
		}
		var q BacklogQuota
		if r.Method == http.MethodPost {
			if err := decodeAdmin(r.Body, &q); err != nil {
				adminError(w, http.StatusBadRequest, "Invalid backlog quota: "+err.Error())
				return
			}
			switch q.Policy {
			case "producer_request_hold", "producer_exception", "consumer_backlog_eviction":
			default:
				adminError(w, http.StatusBadRequest, fmt.Sprintf("Invalid retention policy %q", q.Policy))
				return
			}
		}
		a.update(ns, func(p *nsPolicies) {
			if r.Method == http.MethodDelete {
				delete(p.backlogQuotas, kind)
				return
			}
			if p.backlogQuotas == nil {
				p.backlogQuotas = map[string]BacklogQuota{}
			}
			p.backlogQuotas[kind] = q
		})
		w.WriteHeader(http.StatusNoContent)
	case policy == "subscriptionExpirationTime" && r.Method == http.MethodGet:
		a.mu.Lock()
		var minutes *int
		if p := a.ns[ns]; p != nil && p.expiryMinutes != nil {
			m := *p.expiryMinutes
			minutes = &m
		}
		a.mu.Unlock()
		if minutes == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		adminJSON(w, *minutes)
	case policy == "subscriptionExpirationTime" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		var minutes int
		if r.Method == http.MethodPost {
			if err := decodeAdmin(r.Body, &minutes); err != nil || minutes < 0 {
				adminError(w, http.StatusBadRequest, "Invalid value for subscription expiration time")
				return
			}
		}
		a.update(ns, func(p *nsPolicies) {
			if r.Method == http.MethodDelete {
				p.expiryMinutes = nil
				return
			}
			p.expiryMinutes = &minutes
		})
		w.WriteHeader(http.StatusNoContent)
	case policy == "backlogQuotaMap" || policy == "backlogQuota" || policy == "subscriptionExpirationTime":
		adminError(w, http.StatusMethodNotAllowed, "Method not allowed: "+r.Method)
	default:
		adminError(w, http.StatusNotFound, "Unknown path: "+r.URL.Path)
	}
}

// update applies f to the policies of namespace ns.
func (a *adminPolicies) update(ns string, f func(*nsPolicies)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ns == nil {
		a.ns = map[string]*nsPolicies{}
	}
	p := a.ns[ns]
	if p == nil {
		p = &nsPolicies{}
		a.ns[ns] = p
	}
	f(p)
	enforced := false
	for _, p := range a.ns {
		if q, ok := p.backlogQuotas[QuotaDestinationStorage]; ok && q.LimitSize > 0 {
			enforced = true
		}
		if q, ok := p.backlogQuotas[QuotaMessageAge]; ok && q.LimitTime > 0 {
			enforced = true
		}
	}
	a.enforced.Store(enforced)
}

// maxAdminBody bounds the body of an admin request.
const maxAdminBody = 1 << 16

// decodeAdmin decodes the JSON body of an admin request into v.
func decodeAdmin(body io.Reader, v any) error {
	return json.NewDecoder(io.LimitReader(body, maxAdminBody)).Decode(v)
}

// adminJSON answers v as JSON.
func adminJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// adminError answers an error as Pulsar's admin API does.
func adminError(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"reason": reason})
}
