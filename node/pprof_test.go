package node

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestPprofFlagServesProfilesOnItsOwnListener(t *testing.T) {
	d, err := startDebugServer("127.0.0.1:0", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.close(); err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get("http://" + d.Addr() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "test") {
		t.Fatalf("cmdline: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + d.Addr() + "/v1/intents")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the debug listener serves only pprof, got %d for the API", resp.StatusCode)
	}
}
