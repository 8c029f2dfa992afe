package main

import (
	"io"
	"testing"
)

// TestParseConfigOTLPEndpoint: parseConfig resolves its --otlp-endpoint
// and the environment with tracing.Endpoint (whose own test covers the
// order and the checks): the flag and the standard variable reach the
// config, a bad endpoint is refused.
func TestParseConfigOTLPEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"flag", []string{"--otlp-endpoint", "http://c:4318"}, nil, "http://c:4318", false},
		{"standard variable", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces", false},
		{"not a URL", []string{"--otlp-endpoint", "collector:4318"}, nil, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--upstream", "http://127.0.0.1:9000", "--ledger", "http://127.0.0.1:8101"}, tt.args...)
			c, err := parseConfig(args, func(k string) string { return tt.env[k] }, io.Discard)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted: %q", c.otlpEndpoint)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.otlpEndpoint != tt.want {
				t.Fatalf("otlpEndpoint %q, want %q", c.otlpEndpoint, tt.want)
			}
		})
	}
}
