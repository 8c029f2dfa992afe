package tracing

import (
	"strings"
	"testing"
)

// TestEndpoint: the flag wins, then the standard traces endpoint (as
// given), then the standard base endpoint plus /v1/traces; nothing set is
// no tracing; an endpoint that is not an http(s) URL with a host is
// refused, whether the flag or the environment names it.
func TestEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		flag    string
		env     map[string]string
		want    string
		wantErr string // a part of the error; "" is none
	}{
		{name: "none"},
		{name: "flag", flag: "http://collector:4318", want: "http://collector:4318"},
		{name: "standard base endpoint", env: map[string]string{EnvEndpoint: "http://c:4318"}, want: "http://c:4318/v1/traces"},
		{name: "base endpoint with a slash", env: map[string]string{EnvEndpoint: "http://c:4318/"}, want: "http://c:4318/v1/traces"},
		{name: "blanks around a variable", env: map[string]string{EnvEndpoint: " http://c:4318 "}, want: "http://c:4318/v1/traces"},
		{name: "blank variables are none", env: map[string]string{EnvEndpoint: " ", EnvTracesEndpoint: " "}},
		{name: "standard traces endpoint as given", env: map[string]string{EnvTracesEndpoint: "https://b/traces"}, want: "https://b/traces"},
		{name: "standard traces endpoint wins", env: map[string]string{EnvEndpoint: "http://a:4318", EnvTracesEndpoint: "https://b/traces"}, want: "https://b/traces"},
		{name: "the flag wins", flag: "http://flag:4318", env: map[string]string{EnvEndpoint: "http://env:4318", EnvTracesEndpoint: "http://env/traces"}, want: "http://flag:4318"},
		{name: "not a URL", flag: "collector:4318", wantErr: `--otlp-endpoint "collector:4318": want an http:// or https://`},
		{name: "grpc scheme", flag: "grpc://collector:4317", wantErr: "grpc://collector:4317"},
		{name: "no host", flag: "http:///v1/traces", wantErr: "with a host"},
		{name: "a bad base endpoint in the environment", env: map[string]string{EnvEndpoint: "grpc://c:4317"}, wantErr: "grpc://c:4317/v1/traces"},
		{name: "a bad traces endpoint in the environment", env: map[string]string{EnvTracesEndpoint: "c:4318"}, wantErr: `"c:4318"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Endpoint(tt.flag, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Endpoint = %q, %v; want an error saying %q", got, err, tt.wantErr)
				}
				if got != "" {
					t.Fatalf("Endpoint = %q with its error, want \"\"", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Endpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTracesURL: a URL without a path gets /v1/traces, one with a path
// is posted to as given; Check takes "" (tracing off) and what TracesURL
// takes.
func TestTracesURL(t *testing.T) {
	for _, tt := range []struct {
		endpoint, want string
		wantErr        bool
	}{
		{endpoint: "http://c:4318", want: "http://c:4318/v1/traces"},
		{endpoint: "https://c:4318/", want: "https://c:4318/v1/traces"},
		{endpoint: "http://c:4318/custom/traces", want: "http://c:4318/custom/traces"},
		{endpoint: "c:4318", wantErr: true},
		{endpoint: "ftp://c", wantErr: true},
		{endpoint: "http://%zz", wantErr: true},
	} {
		got, err := TracesURL(tt.endpoint)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("TracesURL(%q) = %q, %v; want %q (error: %v)", tt.endpoint, got, err, tt.want, tt.wantErr)
		}
		if cerr := Check(tt.endpoint); (cerr != nil) != tt.wantErr {
			t.Errorf("Check(%q) = %v, want error: %v", tt.endpoint, cerr, tt.wantErr)
		}
	}
	if err := Check(""); err != nil {
		t.Errorf("Check(\"\") = %v, want nil (tracing off)", err)
	}
}
