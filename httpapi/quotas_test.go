package httpapi

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// nsKeys makes a keyset of fresh keys, each in its own namespace, and
// returns it with each key's Authorization header. spec is name ->
// "namespace roles,...".
func nsKeys(t *testing.T, spec map[string]string) (*auth.Keyset, map[string][]string) {
	t.Helper()
	keys := map[string][]string{}
	var entries []string
	for name, v := range spec {
		ns, roles, _ := strings.Cut(v, " ")
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = bearer(plain)
		rs, _ := json.Marshal(strings.Split(roles, ","))
		entries = append(entries, fmt.Sprintf(`{"name":%q,"namespace":%q,"roles":%s,"sha256":%q}`, name, ns, rs, sum))
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return ks, keys
}

func withQuotas(t *testing.T, q ledger.NamespaceQuotas) envOption {
	return func(c *Config) {
		if err := c.Service.SetNamespaceQuotas(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNamespaceQuotasHTTP: a namespace over its claims per second is
// answered 429 namespace_rate_limited with Retry-After, and served again
// once the wait passed; a namespace at its maximum of intents is answered
// 507 namespace_full and nothing is written, while its completes and the
// owner's repeats are served; the usage route shows what it holds, to its
// own keys and to an admin, not to another namespace's key.
func TestNamespaceQuotasHTTP(t *testing.T) {
	ks, keys := nsKeys(t, map[string]string{
		"payer": "pay agent,reader", "opser": "ops agent,reader", "admin": "pay admin",
	})
	e := newEnv(t, func(c *Config) { c.Auth = ks },
		withQuotas(t, ledger.NamespaceQuotas{"pay": {ClaimsPerSecond: 1, Burst: 2}, "ops": {MaxIntents: 2}}))
	claim := func(who, key string) reply {
		return e.do(t, http.MethodPost, "/v1/intents", newClaim(key, "o-"+who), keys[who]...)
	}

	for _, k := range []string{"p1", "p2"} {
		answer(t, claim("payer", k), http.StatusCreated)
	}
	before := proposed(e.mem)
	r := claim("payer", "p3")
	p := problemOf(t, r, http.StatusTooManyRequests, CodeNamespaceRateLimited)
	if r.header.Get("Retry-After") != "1" || p.RetryAfterMS != 1000 {
		t.Fatalf("429 with Retry-After %q, retry_after_ms %d; want 1 s: %s", r.header.Get("Retry-After"), p.RetryAfterMS, r)
	}
	if proposed(e.mem) != before {
		t.Fatal("a rate-limited claim was proposed")
	}
	answer(t, claim("opser", "o1"), http.StatusCreated) // another namespace is not limited
	e.mem.Advance(time.Second)
	answer(t, claim("payer", "p3"), http.StatusCreated)

	g := answer(t, claim("opser", "o2"), http.StatusCreated)
	before = proposed(e.mem)
	r = claim("opser", "o3")
	p = problemOf(t, r, http.StatusInsufficientStorage, CodeNamespaceFull)
	if !strings.Contains(p.Detail, "holds 2 intents") {
		t.Errorf("detail %q does not say what the namespace holds", p.Detail)
	}
	if proposed(e.mem) != before {
		t.Fatal("a claim refused as namespace_full was proposed")
	}
	problemOf(t, e.do(t, http.MethodGet, keyPath("o3"), nil, keys["opser"]...), http.StatusNotFound, string(fsm.StatusNotFound))
	answer(t, claim("opser", "o2"), http.StatusOK) // the owner's repeat adds no intent
	r = e.do(t, http.MethodPost, keyPath("o2", "complete"),
		map[string]any{"owner": "o-opser", "fencing_token": g.FencingToken, "outcome": "executed"}, keys["opser"]...)
	if r.status != http.StatusOK {
		t.Fatalf("complete in a full namespace: %s", r)
	}
	answer(t, claim("opser", "o2"), http.StatusOK) // duplicate

	type usage struct {
		Namespace string         `json:"namespace"`
		Intents   int            `json:"intents"`
		Bytes     int64          `json:"bytes"`
		ByState   map[string]int `json:"by_state"`
		Quota     *struct {
			MaxIntents int `json:"max_intents"`
		} `json:"quota"`
	}
	readUsage := func(who, ns string, want int) usage {
		t.Helper()
		r := e.do(t, http.MethodGet, "/v1/namespaces/"+ns+"/usage", nil, keys[who]...)
		if r.status != want {
			t.Fatalf("%s reading %s's usage: %s, want %d", who, ns, r, want)
		}
		var u usage
		if want == http.StatusOK {
			if err := json.Unmarshal(r.body, &u); err != nil {
				t.Fatal(err)
			}
		}
		return u
	}
	u := readUsage("opser", "ops", http.StatusOK)
	if u.Namespace != "ops" || u.Intents != 2 || u.ByState["executed"] != 1 || u.ByState["declared"] != 1 || u.Bytes == 0 ||
		u.Quota == nil || u.Quota.MaxIntents != 2 {
		t.Fatalf("ops usage %+v", u)
	}
	if u := readUsage("admin", "ops", http.StatusOK); u.Intents != 2 {
		t.Fatalf("the admin reads ops usage %+v", u)
	}
	readUsage("payer", "ops", http.StatusForbidden)
	if u := readUsage("payer", "pay", http.StatusOK); u.Intents != 3 || u.Quota == nil {
		t.Fatalf("pay usage %+v", u)
	}
	problemOf(t, e.do(t, http.MethodGet, "/v1/namespaces/Bad/usage", nil, keys["admin"]...), http.StatusBadRequest, CodeBadRequest)

	refused := counterValue(t, e.reg, "intentd_namespace_claims_total", map[string]string{"namespace": "ops", "status": CodeNamespaceFull})
	limited := counterValue(t, e.reg, "intentd_namespace_claims_total", map[string]string{"namespace": "pay", "status": CodeNamespaceRateLimited})
	if refused != 1 || limited != 1 {
		t.Fatalf("quota refusals counted: %v namespace_full, %v namespace_rate_limited; want 1 and 1", refused, limited)
	}
}

// counterValue is the value of the sample of family name with labels.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// namespaceLabels is every value of the namespace label in the families
// named intentd_namespace_*.
func namespaceLabels(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "intentd_namespace_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "namespace" {
					seen[lp.GetValue()] = true
				}
			}
		}
	}
	var out []string
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// TestNamespaceMetricsStayBounded: the metrics by namespace name the
// configured namespaces (the default, the keys', those with a quota) and
// _other, whatever namespaces the ledger holds or requests act in: claims
// in namespaces nobody configured, and intents written there, are summed
// under _other, and the stored counts are the ledger's.
func TestNamespaceMetricsStayBounded(t *testing.T) {
	e := newEnv(t, withQuotas(t, ledger.NamespaceQuotas{"pay": {MaxIntents: 100}}),
		func(c *Config) {
			c.Identify = func(c echo.Context) (Identity, bool) {
				return Identity{Name: "k", Namespace: c.Request().Header.Get("X-Test-Namespace")}, true
			}
		})
	for i, ns := range []string{"pay", "ghost-1", "ghost-2", "ghost-3", "pay"} {
		r := e.do(t, http.MethodPost, "/v1/intents", newClaim(fmt.Sprint("k", i), "o"), "X-Test-Namespace", ns)
		answer(t, r, http.StatusCreated)
	}
	// And one written without a request (a namespace whose key was since
	// removed, say).
	e.mem.Seed(&fsm.Claim{Namespace: "ghost-4", Key: "k", Tool: "payments.refund", Owner: "o", Payload: []byte(`{}`),
		Fingerprint: strings.Repeat("0", 64), DefaultLeaseMS: 30000, DedupeWindowMS: 60000})

	got := strings.Join(namespaceLabels(t, e.reg), " ")
	if want := "_other default pay"; got != want {
		t.Fatalf("namespace label values %q, want %q", got, want)
	}
	for ns, want := range map[string]float64{"pay": 2, OtherNamespace: 4, "default": 0} {
		if got := counterValue(t, e.reg, "intentd_namespace_intents", map[string]string{"namespace": ns, "state": "declared"}); got != want {
			t.Errorf("declared intents of %s = %v, want %v", ns, got, want)
		}
	}
	if got := counterValue(t, e.reg, "intentd_namespace_claims_total", map[string]string{"namespace": OtherNamespace, "status": "granted"}); got != 3 {
		t.Errorf("granted claims of _other = %v, want 3", got)
	}
	if got := counterValue(t, e.reg, "intentd_namespace_stored_bytes", map[string]string{"namespace": "pay"}); got <= 0 {
		t.Errorf("stored bytes of pay = %v", got)
	}
}
