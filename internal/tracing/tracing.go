// Package tracing builds the OpenTelemetry tracer provider that intentd,
// intent-proxy and intent-mcp export their spans with, over OTLP/HTTP
// (docs/operations.md, "Traces"). Tracing is off unless an endpoint is
// configured: New returns nil then, and the callers install no tracer at
// all, so an untraced process pays nothing for it.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Standard OpenTelemetry environment variables the commands read when no
// --otlp-endpoint is given: the traces endpoint (a full URL, used as
// given) wins over the base endpoint (to which TracesPath is added).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// TracesPath is the OTLP/HTTP path of trace exports.
const TracesPath = "/v1/traces"

// Config says where and as what a process exports its spans.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL
	// (http://collector:4318); TracesPath is added when it has no path.
	// Empty: tracing is off.
	Endpoint string
	// Service is the resource's service.name (intentd, intent-proxy,
	// intent-mcp); Instance its service.instance.id (the node's ID).
	Service, Instance string
}

// Endpoint is the endpoint a command exports its traces to: flag (the
// command's --otlp-endpoint) when it is set, else the one the standard
// environment names (EnvTracesEndpoint as given, else EnvEndpoint plus
// TracesPath); "" is no tracing. An endpoint that Check refuses is an
// error, so a command with a bad one fails as it starts.
func Endpoint(flag string, getenv func(string) string) (string, error) {
	endpoint := flag
	if endpoint == "" {
		endpoint = endpointFromEnv(getenv)
	}
	if err := Check(endpoint); err != nil {
		return "", err
	}
	return endpoint, nil
}

// Check reports what is wrong with endpoint, if anything: "" (tracing
// off) is fine, any other must be a URL TracesURL accepts.
func Check(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	_, err := TracesURL(endpoint)
	return err
}

// endpointFromEnv is the traces endpoint the standard environment names
// (EnvTracesEndpoint as given, else EnvEndpoint plus TracesPath), or "".
func endpointFromEnv(getenv func(string) string) string {
	if u := strings.TrimSpace(getenv(EnvTracesEndpoint)); u != "" {
		return u
	}
	if u := strings.TrimSpace(getenv(EnvEndpoint)); u != "" {
		return strings.TrimRight(u, "/") + TracesPath
	}
	return ""
}

// TracesURL checks endpoint and returns the URL spans are posted to: an
// http or https URL with a host; a URL without a path gets TracesPath.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("--otlp-endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("--otlp-endpoint %q: want an http:// or https:// URL with a host (http://collector:4318)", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = TracesPath
	}
	return u.String(), nil
}

// New returns a tracer provider that batches spans and posts them to
// cfg.Endpoint, sampling as the caller's traceparent says (a root span is
// always sampled), or nil when cfg.Endpoint is empty. Shut it down to
// flush the spans still queued.
func New(ctx context.Context, cfg Config) (*sdktrace.TracerProvider, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	target, err := TracesURL(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP/HTTP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.Service)}
	if cfg.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.Instance))
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	), nil
}
