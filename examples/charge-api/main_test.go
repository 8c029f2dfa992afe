package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEveryPostCharges(t *testing.T) {
	a := &api{}
	srv := httptest.NewServer(a.routes())
	defer srv.Close()
	post := func(body string, hdr ...string) (*http.Response, Charge) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/v1/charges", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c Charge
		_ = json.NewDecoder(resp.Body).Decode(&c)
		return resp, c
	}
	// The same request twice is two charges: the API does not deduplicate.
	for i, want := range []string{"ch_0001", "ch_0002"} {
		resp, c := post(`{"amount":1299,"currency":"usd"}`, "Idempotency-Key", `"order-1"`, "Intent-Fencing-Token", "7")
		if resp.StatusCode != http.StatusCreated || c.ID != want || c.Amount != 1299 || c.IdempotencyKey != `"order-1"` || c.FencingToken != 7 {
			t.Fatalf("post %d: %d %+v", i, resp.StatusCode, c)
		}
	}
	for _, bad := range []string{`{"amount":0,"currency":"usd"}`, `{"amount":5}`, `{"amount":5,"currency":"usd","x":1}`, `nope`} {
		if resp, _ := post(bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, resp.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/charges")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Charges []Charge }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Charges) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
}
