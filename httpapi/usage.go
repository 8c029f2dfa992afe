package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
)

// OtherNamespace is the namespace label of the metrics by namespace for
// every namespace that is not configured: no namespace may be called it
// (namespace.Valid refuses a leading underscore), so it never collides
// with one, and an unknown namespace never makes a new label value.
const OtherNamespace = "_other"

// namespaceLabel is ns as the metrics by namespace name it: ns itself
// when it is configured (an API key acts in it, it has a quota, or it is
// the default namespace), else OtherNamespace. The label values are
// bounded by the configuration, whatever namespaces requests name.
func (s *Server) namespaceLabel(ns string) string {
	if ns == namespace.Default || (s.keys != nil && s.keys.HasNamespace(ns)) {
		return ns
	}
	if _, ok := s.svc.NamespaceQuota(ns); ok {
		return ns
	}
	return OtherNamespace
}

// configuredNamespaces are the namespaces the metrics name: the default,
// the API keys' and those with a quota.
func (s *Server) configuredNamespaces() []string {
	out := []string{namespace.Default}
	seen := map[string]bool{namespace.Default: true}
	add := func(names []string) {
		for _, ns := range names {
			if !seen[ns] {
				seen[ns] = true
				out = append(out, ns)
			}
		}
	}
	if s.keys != nil {
		add(s.keys.Namespaces())
	}
	add(s.svc.NamespaceQuotas().Namespaces())
	return out
}

// usageView is the body of GET /v1/namespaces/{ns}/usage.
type usageView struct {
	Namespace string `json:"namespace"`
	// Intents and Bytes are what the namespace holds (keys, payloads and
	// results), ByState its intents by state.
	Intents int               `json:"intents"`
	Bytes   int64             `json:"bytes"`
	ByState map[fsm.State]int `json:"by_state"`
	// Quota is the namespace's quota, when it has one.
	Quota *ledger.NamespaceQuota `json:"quota,omitempty"`
}

// namespaceUsage serves GET /v1/namespaces/{ns}/usage: what a namespace
// holds and its quota. A key reads its own namespace, an admin any.
func (s *Server) namespaceUsage(c echo.Context) error {
	ns := c.Param("ns")
	if !namespace.Valid(ns) {
		p := newProblem(CodeBadRequest, fmt.Sprintf("namespace %q must match [a-z0-9][a-z0-9_-]{0,62}", ns))
		p.Field = "namespace"
		return s.writeProblem(c, p)
	}
	if ns != s.namespaceOf(c) && !s.isAdmin(c) {
		return s.writeProblem(c, newProblem(CodeForbidden, "only an admin reads another namespace's usage"))
	}
	cons, p := consistencyOf(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	u, err := s.svc.NamespaceUsage(c.Request().Context(), ns, cons)
	if err != nil {
		return s.fail(c, err, nil)
	}
	v := usageView{Namespace: ns, Intents: u.Intents, Bytes: u.Bytes, ByState: u.ByState}
	if q, ok := s.svc.NamespaceQuota(ns); ok {
		v.Quota = &q
	}
	return writeJSON(c, http.StatusOK, v)
}

// usageCollector exports what each configured namespace holds, read from
// this node's copy of the ledger when scraped (the ledger keeps the
// counts: nothing here counts on its own). The namespaces that are not
// configured are summed under OtherNamespace.
type usageCollector struct {
	s              *Server
	intents, bytes *prometheus.Desc
}

func newUsageCollector(s *Server) *usageCollector {
	return &usageCollector{
		s: s,
		intents: prometheus.NewDesc("intentd_namespace_intents",
			"Intents a namespace holds in this node's copy of the ledger, by state (in_doubt and pending_approval among them); namespaces that are not configured are summed as _other.",
			[]string{"namespace", "state"}, nil),
		bytes: prometheus.NewDesc("intentd_namespace_stored_bytes",
			"Bytes of keys, payloads and results a namespace holds in this node's copy of the ledger; namespaces that are not configured are summed as _other.",
			[]string{"namespace"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (u *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- u.intents
	ch <- u.bytes
}

// Collect implements prometheus.Collector.
func (u *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byNS, err := u.s.svc.UsageByNamespace(ctx)
	if err != nil {
		u.s.log.Warn("httpapi: reading the usage by namespace for the metrics", "err", err)
		return
	}
	type sum struct {
		states map[fsm.State]int
		bytes  int64
	}
	sums := map[string]*sum{}
	for _, ns := range append(u.s.configuredNamespaces(), OtherNamespace) {
		sums[ns] = &sum{states: map[fsm.State]int{}}
	}
	for ns, use := range byNS {
		t := sums[u.s.namespaceLabel(ns)]
		if t == nil { // configured after configuredNamespaces was read
			t = sums[OtherNamespace]
		}
		t.bytes += use.Bytes
		for st, n := range use.ByState {
			t.states[st] += n
		}
	}
	for ns, t := range sums {
		for _, st := range fsm.States {
			ch <- prometheus.MustNewConstMetric(u.intents, prometheus.GaugeValue, float64(t.states[st]), ns, string(st))
		}
		ch <- prometheus.MustNewConstMetric(u.bytes, prometheus.GaugeValue, float64(t.bytes), ns)
	}
}
