package main

import (
	"io"
	"testing"
)

// --otlp-endpoint, INTENTD_OTLP_ENDPOINT and the standard OpenTelemetry
// variables reach the node's Config (the flag wins, then the traces
// endpoint, then the base endpoint plus /v1/traces); nothing set is no
// tracing, and a URL that is not http(s) is refused.
func TestParseConfigOTLPEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"none", nil, nil, "", false},
		{"flag", []string{"--otlp-endpoint", "http://collector:4318"}, nil, "http://collector:4318", false},
		{"intentd variable", nil, map[string]string{"INTENTD_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318", false},
		{"standard base endpoint", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces", false},
		{"standard traces endpoint wins", nil, map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/traces"}, "https://b/traces", false},
		{"the flag wins", []string{"--otlp-endpoint", "http://flag:4318"}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}, "http://flag:4318", false},
		{"not a URL", []string{"--otlp-endpoint", "collector:4318"}, nil, "", true},
		{"grpc scheme", []string{"--otlp-endpoint", "grpc://collector:4317"}, nil, "", true},
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
