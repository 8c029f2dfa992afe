package main

import (
	"io"
	"testing"
)

// TestParseConfigOTLPEndpoint: --otlp-endpoint, INTENTD_OTLP_ENDPOINT and
// the standard OpenTelemetry variables reach the node's Config through
// tracing.Endpoint (whose own test covers the order and the checks), and
// a bad endpoint is refused.
func TestParseConfigOTLPEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"flag", []string{"--otlp-endpoint", "http://collector:4318"}, nil, "http://collector:4318", false},
		{"intentd variable", nil, map[string]string{"INTENTD_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318", false},
		{"standard variable", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces", false},
		{"not a URL", []string{"--otlp-endpoint", "collector:4318"}, nil, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"INTENTD_GOSSIP_KEY": testGossipKey}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := parseConfig(append([]string{"--data-dir", t.TempDir()}, tt.args...), func(k string) string { return env[k] }, io.Discard)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted: OTLPEndpoint %q", c.OTLPEndpoint)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.OTLPEndpoint != tt.want {
				t.Fatalf("OTLPEndpoint = %q, want %q", c.OTLPEndpoint, tt.want)
			}
		})
	}
}
