package cli

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		format, level string
		ok            bool
		want          string // in the output of an info line
	}{
		{"text", "info", true, "msg=hello"},
		{"json", "debug", true, `"msg":"hello"`},
		{"json", "warn", true, ""}, // info is below warn
		{"yaml", "info", false, ""},
		{"text", "loud", false, ""},
	} {
		var buf bytes.Buffer
		l, err := NewLogger(&buf, tc.format, tc.level)
		if (err == nil) != tc.ok {
			t.Errorf("%s/%s: err %v", tc.format, tc.level, err)
			continue
		}
		if err != nil {
			continue
		}
		l.Info("hello")
		if got := buf.String(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s/%s: logged %q, want %q", tc.format, tc.level, got, tc.want)
		}
	}
}

func TestSetFromEnv(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	addr := fs.String("http-addr", "a", "")
	wait := fs.Duration("max-wait", time.Second, "")
	other := fs.String("other", "o", "")
	env := map[string]string{"X_HTTP_ADDR": "from-env", "X_MAX_WAIT": "3s", "HTTP_ADDR": "wrong prefix"}
	set, err := SetFromEnv(fs, "X_", func(k string) string { return env[k] })
	if err != nil || *addr != "from-env" || *wait != 3*time.Second || *other != "o" {
		t.Fatalf("err %v: %q %v %q", err, *addr, *wait, *other)
	}
	if !reflect.DeepEqual(set, map[string]bool{"http-addr": true, "max-wait": true}) {
		t.Errorf("set = %v", set)
	}
	// The command line wins over the environment.
	if err := fs.Parse([]string{"--http-addr", "from-flag"}); err != nil || *addr != "from-flag" {
		t.Errorf("after Parse: %q, %v", *addr, err)
	}
	// A value the flag refuses names the variable.
	env["X_MAX_WAIT"] = "soon"
	if _, err := SetFromEnv(fs, "X_", func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "X_MAX_WAIT") {
		t.Errorf("bad value: %v", err)
	}
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                  nil,
		" , ,":              nil,
		"a":                 {"a"},
		" a , b,,c ":        {"a", "b", "c"},
		"http://x:1,http:y": {"http://x:1", "http:y"},
	} {
		if got := SplitList(in); !reflect.DeepEqual(got, want) {
			t.Errorf("SplitList(%q) = %q, want %q", in, got, want)
		}
	}
}
