package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
)

// cmdSettings is "settings" and "settings set --audit-retention N". The
// client package has no call for /v1/settings yet, so this one speaks
// HTTP directly.
func cmdSettings(ctx context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "set")
	name := "settings"
	if sub != "" {
		name += " " + sub
	}
	fs := c.flags(name)
	var retention *int
	if sub == "set" {
		retention = fs.Int("audit-retention", 0, "audit events each namespace keeps (0: the default)")
	}
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var st fsm.Settings
	if sub == "set" {
		if !setFlags(fs)["audit-retention"] {
			return usagef("settings set needs --audit-retention N")
		}
		if *retention < 0 || *retention > fsm.MaxAuditRetention {
			return usagef("--audit-retention must be between 0 and %d", fsm.MaxAuditRetention)
		}
		if err := c.rawCall(ctx, http.MethodPut, "/v1/settings", map[string]int{"audit_retention": *retention}, &st); err != nil {
			return err
		}
	} else if err := c.rawCall(ctx, http.MethodGet, "/v1/settings", nil, &st); err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]int{"audit_retention": st.AuditRetention})
	}
	ret := fmt.Sprint(st.AuditRetention)
	if st.AuditRetention == 0 {
		ret = fmt.Sprintf("0 (the default, %d)", fsm.DefaultAuditRetention)
	}
	tw := c.table()
	fmt.Fprintf(tw, "audit_retention\t%s\n", ret)
	return tw.Flush()
}

// rawCall sends one JSON request to the first node that can answer it,
// with the API key, and decodes a success into out or a problem document
// into a *client.Problem. Only for idempotent calls: a node that cannot
// answer (network error, 503) is followed by the next.
func (c *cli) rawCall(ctx context.Context, method, path string, body, out any) error {
	cl, err := c.client() // for the normalized addresses
	if err != nil {
		return err
	}
	hc, err := c.httpClient()
	if err != nil {
		return err
	}
	if hc == nil {
		hc = &http.Client{Timeout: client.DefaultHTTPTimeout}
	}
	var payload []byte
	if body != nil {
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	var lastErr error
	for _, base := range cl.Addrs() {
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %s %s: %w", client.ErrUnavailable, method, path, ctx.Err())
			}
			lastErr = fmt.Errorf("%w: %s %s%s: %v", client.ErrUnavailable, method, base, path, err)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			lastErr = fmt.Errorf("%w: %s %s%s: %v", client.ErrUnavailable, method, base, path, err)
			continue
		}
		if resp.StatusCode/100 == 2 {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("%s %s: the answer is not JSON: %w", method, path, err)
			}
			return nil
		}
		p := problemOf(resp, data)
		if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusBadGateway || p.Status == http.StatusGatewayTimeout {
			lastErr = p
			continue
		}
		return p
	}
	return lastErr
}

// problemOf reads an error answer into a *client.Problem.
func problemOf(resp *http.Response, data []byte) *client.Problem {
	var w struct {
		Type               string         `json:"type"`
		Title              string         `json:"title"`
		Status             int            `json:"status"`
		Detail             string         `json:"detail"`
		Code               string         `json:"code"`
		Field              string         `json:"field"`
		Intent             *client.Intent `json:"intent"`
		Fingerprint        string         `json:"fingerprint"`
		RequestFingerprint string         `json:"request_fingerprint"`
		RetryAfterMS       int64          `json:"retry_after_ms"`
	}
	_ = json.Unmarshal(data, &w) // a proxy's page: the status speaks
	p := &client.Problem{Status: resp.StatusCode, Code: w.Code, Title: w.Title, Detail: w.Detail, Type: w.Type,
		Field: w.Field, Intent: w.Intent, Fingerprint: w.Fingerprint, RequestFingerprint: w.RequestFingerprint,
		RetryAfter: time.Duration(w.RetryAfterMS) * time.Millisecond}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.Code == "" {
		switch resp.StatusCode {
		case http.StatusBadRequest:
			p.Code = "bad_request"
		case http.StatusNotFound:
			p.Code = "not_found"
		case http.StatusUnauthorized:
			p.Code = "unauthenticated"
		case http.StatusForbidden:
			p.Code = "forbidden"
		case http.StatusUnprocessableEntity:
			p.Code = "unprocessable"
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
			p.Code = "unavailable"
		}
	}
	return p
}
