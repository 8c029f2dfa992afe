package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/frontend/idemproxy"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/internal/doccheck"
	"github.com/intentledger/intentd/internal/probe"
	"github.com/intentledger/intentd/node"
	"github.com/intentledger/intentd/testkit/nodetest"
)

const (
	alertsFile = "prometheus/alerts.yml"
	opsDoc     = "../docs/operations.md"
	runbookURL = "https://github.com/intentledger/intentd/blob/main/docs/operations.md#"
)

// prometheusOwn are series Prometheus itself makes for every target; no
// binary exports them.
var prometheusOwn = map[string]bool{"up": true}

// loadRules parses the rules file with Prometheus's own rule parser (the
// one `promtool check rules` and the server use) and fails on any error.
func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

func TestAlertRulesParseAndLinkTheirRunbooks(t *testing.T) {
	rules := loadRules(t)
	src, err := os.ReadFile(opsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := doccheck.Parse(src).Anchors
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("a recording rule %q: the file holds alerts only", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, sev)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary", r.Alert)
		}
		link := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(link, runbookURL)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is not a section of docs/operations.md", r.Alert, link)
		}
	}
	// What issue 35 asks the rules to cover, each by at least one alert.
	for _, want := range []struct{ topic, alert string }{
		{"no leader", "IntentdNoLeader"},
		{"leadership churn", "IntentdLeadershipChurn"},
		{"commit latency", "IntentdCommitLatencyHigh"},
		{"fsync latency", "IntentdFsyncLatencyHigh"},
		{"disk headroom", "IntentdDataDirSpaceLow"},
		{"disk trend", "IntentdDataDirFillingUp"},
		{"snapshot headroom", "IntentdSnapshotHeadroomLow"},
		{"in_doubt growing", "IntentdInDoubtGrowing"},
		{"approvals waiting too long", "IntentdApprovalsStalled"},
		{"auth failures", "IntentdAuthFailures"},
		{"lease losses (intent-proxy)", "IntentProxyLeaseLost"},
		{"lease losses (intent-mcp)", "IntentMcpLeaseLost"},
	} {
		if !seen[want.alert] {
			t.Errorf("no alert for %s (%s)", want.topic, want.alert)
		}
	}
}

// metricNames returns the metric names an expression selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// unknownMetrics returns the names expr selects that exported lacks.
func unknownMetrics(expr string, exported map[string]bool) ([]string, error) {
	names, err := metricNames(expr)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, n := range names {
		if n == "" {
			unknown = append(unknown, "(a selector without a metric name)")
		} else if !exported[n] && !prometheusOwn[n] {
			unknown = append(unknown, n)
		}
	}
	return unknown, nil
}

func TestAlertExpressionsUseExportedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node: integration tier")
	}
	exported := nodeMetricNames(t)
	for name := range frontEndMetricNames(t) {
		exported[name] = true
	}
	// The checker itself, on expressions whose answer is known.
	controls := []struct {
		name    string
		expr    string
		unknown []string
	}{
		{"exported gauge", `intentd_raft_leader == 0`, nil},
		{"histogram bucket of an exported histogram", `rate(intentd_raft_log_write_duration_seconds_bucket[5m])`, nil},
		{"front-end counter", `increase(intent_proxy_lease_lost_total[5m])`, nil},
		{"unknown name (control)", `rate(intentd_fsync_seconds_bucket[5m]) > 0`, []string{"intentd_fsync_seconds_bucket"}},
		{"misspelt label-free name in a binary expression (control)", `intentd_data_dir_free_bytes / intentd_data_dir_total_bytes`, []string{"intentd_data_dir_total_bytes"}},
	}
	for _, c := range controls {
		t.Run("control/"+c.name, func(t *testing.T) {
			got, err := unknownMetrics(c.expr, exported)
			if err != nil || !slices.Equal(got, c.unknown) {
				t.Fatalf("unknown %v (err %v), want %v", got, err, c.unknown)
			}
		})
	}
	for _, r := range loadRules(t) {
		t.Run(r.Alert, func(t *testing.T) {
			names, err := metricNames(r.Expr)
			if err != nil || len(names) == 0 {
				t.Fatalf("names %v, err %v", names, err)
			}
			unknown, _ := unknownMetrics(r.Expr, exported)
			if len(unknown) > 0 {
				t.Errorf("%s selects %v, which no binary exports", r.Alert, unknown)
			}
		})
	}
}

// nodeMetricNames starts one intentd node in this process with the
// production wiring and defaults (auth required, rate limits on), makes
// the series that appear only once something happened appear (a claim,
// failed authentications until the auth-failure limit answers 429), and
// returns the metric names its /metrics serves, a histogram's _bucket,
// _sum and _count among them.
func nodeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	key, hash, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	gossip := make([]byte, 32)
	if _, err := rand.Read(gossip); err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.ID, cfg.DataDir = "n1", filepath.Join(t.TempDir(), "n1")
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = nodetest.FreePort(t), nodetest.FreePort(t), nodetest.FreePort(t)
	cfg.BootstrapExpect = 1
	cfg.Auth, cfg.APIKeys = node.AuthRequired, "ops:default:admin:"+hash
	cfg.Security.GossipKey = base64.StdEncoding.EncodeToString(gossip)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Timings = cluster.FastTimings()
	n := node.New(cfg)
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	addr := n.HTTPAddr()
	nodetest.WaitFor(t, 30*time.Second, "node ready", func() bool { return nodetest.Ready(addr) })
	if a, err := nodetest.Post(addr, "/v1/intents", map[string]any{"key": "alerts:1", "tool": "test.tool", "owner": "o1", "payload": map[string]any{"n": 1}}); err != nil || a.Code != http.StatusUnauthorized {
		t.Fatalf("a claim without a key answered %+v (%v), want 401", a, err)
	}
	nodetest.WaitFor(t, 30*time.Second, "a granted claim", func() bool {
		a, err := nodetest.SendAs(key, http.MethodPost, addr, "/v1/intents", map[string]any{"key": "alerts:1", "tool": "test.tool", "owner": "o1", "payload": map[string]any{"n": 1}})
		return err == nil && a.Code == http.StatusCreated
	})
	nodetest.WaitFor(t, 30*time.Second, "the auth-failure limit", func() bool {
		a, err := nodetest.SendAs("ik_wrong", http.MethodGet, addr, "/v1/intents/"+url.PathEscape("alerts:1"), nil)
		return err == nil && a.Code == http.StatusTooManyRequests
	})
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for name, f := range families {
		addFamily(names, name, f.GetType().String())
	}
	return names
}

// addFamily adds a metric family's name and, for a histogram or summary,
// the names its samples carry.
func addFamily(names map[string]bool, name, typ string) {
	names[name] = true
	switch typ {
	case "HISTOGRAM", "GAUGE_HISTOGRAM":
		names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
	case "SUMMARY":
		names[name+"_sum"], names[name+"_count"] = true, true
	}
}

// descName reads a Desc's fully-qualified name from its String form
// (client_golang has no accessor).
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describingRegisterer records the families registered through it, with
// their types, from the collectors' descriptions: a vector family with no
// series yet is recorded too.
type describingRegisterer struct {
	prometheus.Registerer
	names map[string]bool
}

// Register records c's families, then registers it.
func (d describingRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := descName.FindStringSubmatch(desc.String()); m != nil {
			typ := "COUNTER"
			switch c.(type) {
			case *prometheus.HistogramVec, prometheus.Histogram:
				typ = "HISTOGRAM"
			}
			addFamily(d.names, m[1], typ)
		}
	}
	return d.Registerer.Register(c)
}

// MustRegister registers cs, panicking on an error as the real one does.
func (d describingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// frontEndMetricNames returns the families intent-proxy and intent-mcp
// register: the registry their main builds (probe.NewRegistry) and the
// metrics they add to it (idemproxy.NewMetrics, mcpgate.NewMetrics).
func frontEndMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, register := range []func(prometheus.Registerer){
		func(r prometheus.Registerer) { idemproxy.NewMetrics(r) },
		func(r prometheus.Registerer) { mcpgate.NewMetrics(r) },
	} {
		reg := probe.NewRegistry()
		register(describingRegisterer{Registerer: reg, names: names})
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			addFamily(names, f.GetName(), f.GetType().String())
		}
	}
	return names
}
