package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/frontend/idemproxy"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig([]string{"--upstream", "http://127.0.0.1:9000", "--ledger", "127.0.0.1:8101, 127.0.0.1:8102"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.listen != "127.0.0.1:8480" || c.maxBody != 64<<10 || c.maxPayload != 64<<10 || c.maxResult != 64<<10 ||
		len(c.ledger) != 2 || c.upstreamTimeout != 30*time.Second || c.defaultRoute.Key != idemproxy.KeyRequired ||
		c.defaultRoute.On5xx != idemproxy.On5xxRecord || c.defaultRoute.Tool != "http" || c.apiKey != "" || c.metricsListen != "" || c.pprof != "" {
		t.Errorf("defaults: %+v", c)
	}
	routes, err := c.loadRoutes()
	if err != nil || len(routes) != 1 || routes[0].Path != "/" || routes[0].Name != "default" ||
		strings.Join(routes[0].ScopeHeaders, ",") != "Authorization,Cookie" || routes[0].SingleCaller {
		t.Errorf("default route: %+v, %v", routes, err)
	}
	// --single-caller opts the default route out of the per-caller scope.
	c, err = parseConfig([]string{"--upstream", "http://127.0.0.1:9000", "--ledger", "n1", "--single-caller"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if routes, err = c.loadRoutes(); err != nil || !routes[0].SingleCaller || len(routes[0].ScopeHeaders) != 0 {
		t.Errorf("--single-caller: %+v, %v", routes, err)
	}

	// The environment sets flags; flags win; INTENTD_API_KEY is the
	// last resort for the key.
	env = map[string]string{"INTENT_PROXY_UPSTREAM": "http://up:1", "INTENT_PROXY_LEDGER": "n1:8100", "INTENTD_API_KEY": "ik_env",
		"INTENT_PROXY_ON_5XX": "retry", "INTENT_PROXY_FINGERPRINT_HEADERS": "content-type, x-account", "INTENT_PROXY_LEASE": "10s", "INTENT_PROXY_PPROF": "127.0.0.1:6061"}
	c, err = parseConfig([]string{"--on-5xx", "in_doubt"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.upstream.Host != "up:1" || c.apiKey != "ik_env" || c.defaultRoute.On5xx != idemproxy.On5xxInDoubt ||
		strings.Join(c.defaultRoute.FingerprintHeaders, ",") != "content-type,x-account" || time.Duration(c.defaultRoute.Lease) != 10*time.Second || c.pprof != "127.0.0.1:6061" {
		t.Errorf("env: %+v", c)
	}
	env["INTENT_PROXY_API_KEY"] = "ik_proxy"
	if c, _ = parseConfig(nil, getenv, io.Discard); c.apiKey != "ik_proxy" {
		t.Errorf("INTENT_PROXY_API_KEY: %q", c.apiKey)
	}

	for _, bad := range [][]string{
		{"--ledger", "n1"},
		{"--upstream", "ftp://x", "--ledger", "n1"},
		{"--upstream", "http://x"},
		{"--upstream", "http://x", "--ledger", "n1", "--key", "sometimes"},
		{"--upstream", "http://x", "--ledger", "n1", "--on-5xx", "ignore"},
		{"--upstream", "http://x", "--ledger", "n1", "--lease", "1ms"},
		{"--upstream", "http://x", "--ledger", "n1", "--max-body", "0"},
		{"--upstream", "http://x", "--ledger", "n1", "extra"},
		{"--upstream", "http://x", "--ledger", "n1", "--tool", "Stripe.Charge"},
		{"--upstream", "http://x", "--ledger", "n1", "--tool", "stripe/charge"},
		{"--upstream", "http://x", "--ledger", "n1", "--single-caller", "--scope-headers", "Authorization"},
	} {
		if _, err := parseConfig(bad, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestLoadRoutesFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "routes.json")
	if err := os.WriteFile(file, []byte(`[{"method":"POST","path":"/v1/charges","tool":"stripe.charge"},{"path":"/v1/"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig([]string{"--upstream", "http://x", "--ledger", "n1", "--routes", file, "--tool", "api", "--on-5xx", "retry"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := c.loadRoutes()
	if err != nil || len(routes) != 2 || routes[0].Tool != "stripe.charge" || routes[1].Tool != "api" || routes[1].On5xx != idemproxy.On5xxRetry {
		t.Fatalf("%+v, %v", routes, err)
	}
	if err := os.WriteFile(file, []byte(`[{"path":"/x","dedupe_window":"1h"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.loadRoutes(); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Errorf("dedupe_window: %v", err)
	}
}
