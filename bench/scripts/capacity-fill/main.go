// Command capacity-fill fills an intentd cluster with unique claims until
// it refuses them (507 ledger_full) or the time is up, completing each
// grant, then checks what was acknowledged. bench-capacity.sh runs it; it
// prints one JSON object.
//
//	capacity-fill --nodes 127.0.0.1:8101,... --clients 32 --duration 240s
//	capacity-fill --verify acked.txt --nodes ...   (every acked key present?)
//	capacity-fill --count 1000000 --duration 2h --progress 30s   (fill to a count; bench-engines.sh)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type answer struct {
	code   int
	status string // problem code or status word
	token  uint64
}

type client struct {
	hc    *http.Client
	nodes []string
}

func (c *client) post(node, path string, body any) (answer, error) {
	b, _ := json.Marshal(body)
	resp, err := c.hc.Post("http://"+node+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v struct {
		Code         string `json:"code"`
		Status       string `json:"status"`
		FencingToken uint64 `json:"fencing_token"`
	}
	_ = json.Unmarshal(raw, &v)
	s := v.Code
	if s == "" {
		s = v.Status
	}
	return answer{code: resp.StatusCode, status: s, token: v.FencingToken}, nil
}

func main() {
	nodes := flag.String("nodes", "127.0.0.1:8101,127.0.0.1:8102,127.0.0.1:8103", "HTTP addresses")
	clients := flag.Int("clients", 32, "concurrent clients")
	duration := flag.Duration("duration", 240*time.Second, "longest fill")
	after := flag.Duration("after-refusal", 5*time.Second, "how long to go on once every client was refused")
	dead := flag.Duration("dead", 15*time.Second, "stop once no claim was answered (no node alive) for this long")
	payload := flag.Int("payload", 200, "payload bytes")
	result := flag.Int("result", 100, "result bytes")
	acked := flag.String("acked", "acked.txt", "file the acknowledged keys are written to")
	verify := flag.String("verify", "", "verify mode: the acked keys file to check")
	count := flag.Int64("count", 0, "stop once this many claims were acknowledged (0: no count, fill until refused or --duration)")
	every := flag.Duration("progress", 0, "print the elapsed seconds and the acknowledged count to stderr at this interval (0: never)")
	flag.Parse()
	c := &client{hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		nodes: strings.Split(*nodes, ",")}
	if *verify != "" {
		out, err := c.verify(*verify)
		for try := 0; err != nil && try < 10; try++ {
			// A cluster at its memory high water may be electing a leader.
			time.Sleep(3 * time.Second)
			out, err = c.verify(*verify)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "capacity-fill:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(out)
		return
	}
	_ = json.NewEncoder(os.Stdout).Encode(c.fill(fillOptions{clients: *clients, duration: *duration, after: *after, dead: *dead,
		payload: *payload, result: *result, ackedPath: *acked, count: *count, progress: *every}))
}

type fillResult struct {
	Acked           int64            `json:"acked_intents"`
	AckedAtRefusal  int64            `json:"acked_at_first_refusal"`
	FirstRefusalSec float64          `json:"first_refusal_s"`
	Seconds         float64          `json:"seconds"`
	Answers         map[string]int64 `json:"answers"`
	Errors          int64            `json:"transport_errors"`
	// After the fill: a duplicate of an acked key, a read, and a
	// claim+complete of a held key answered on a full ledger.
	DuplicateServed, ReadServed bool
	StillRefusing               bool `json:"still_refusing"`
}

// fillOptions are capacity-fill's flags for a fill.
type fillOptions struct {
	clients               int
	duration, after, dead time.Duration
	payload, result       int
	ackedPath             string
	count                 int64         // stop at this many acks (0: no count)
	progress              time.Duration // stderr progress interval (0: none)
}

func (c *client) fill(o fillOptions) fillResult {
	clients, duration, after, dead, payload, result, ackedPath := o.clients, o.duration, o.after, o.dead, o.payload, o.result, o.ackedPath
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	pad := func(n int) string { return strings.Repeat("x", max(n-12, 1)) }
	var acked, ackedAtRefusal, errs atomic.Int64
	var firstRefusal atomic.Int64 // ns since start
	var lastAnswer atomic.Int64   // ns since start of the last answer (any)
	var mu sync.Mutex
	answers := map[string]int64{}
	f, err := os.Create(ackedPath)
	if err != nil {
		panic(err)
	}
	w := bufio.NewWriter(f)
	var refusedClients atomic.Int64
	var allRefusedAt atomic.Int64
	var wg sync.WaitGroup
	if o.progress > 0 {
		go func() {
			t := time.NewTicker(o.progress)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fmt.Fprintf(os.Stderr, "%.0f %d\n", time.Since(start).Seconds(), acked.Load())
				}
			}
		}()
	}
	for i := range clients {
		wg.Go(func() {
			refused := false
			node := i % len(c.nodes)
			for n := 0; ctx.Err() == nil; n++ {
				if at := allRefusedAt.Load(); at != 0 && time.Since(start) > time.Duration(at)+after {
					return
				}
				if time.Since(start) > time.Duration(lastAnswer.Load())+dead {
					return // every node is gone
				}
				if o.count > 0 && acked.Load() >= o.count {
					return
				}
				key := fmt.Sprintf("cap-%d-%d", i, n)
				a, err := c.post(c.nodes[node], "/v1/intents", map[string]any{"key": key, "tool": "bench.fill", "owner": fmt.Sprintf("c%d", i),
					"payload": map[string]any{"p": pad(payload)}})
				if err != nil {
					errs.Add(1)
					node = (node + 1) % len(c.nodes)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if a.code != http.StatusServiceUnavailable {
					lastAnswer.Store(int64(time.Since(start)))
				}
				mu.Lock()
				answers[fmt.Sprintf("%d %s", a.code, a.status)]++
				mu.Unlock()
				switch {
				case a.code == http.StatusCreated:
					acked.Add(1)
					mu.Lock()
					fmt.Fprintln(w, key)
					mu.Unlock()
					ca, err := c.post(c.nodes[node], "/v1/intents/"+url.PathEscape(key)+"/complete", map[string]any{
						"owner": fmt.Sprintf("c%d", i), "fencing_token": a.token, "outcome": "executed", "result": map[string]any{"r": pad(result)}})
					if err != nil {
						errs.Add(1)
					} else {
						mu.Lock()
						answers[fmt.Sprintf("complete %d %s", ca.code, ca.status)]++
						mu.Unlock()
					}
				case a.status == "ledger_full":
					if firstRefusal.CompareAndSwap(0, int64(time.Since(start))) {
						ackedAtRefusal.Store(acked.Load())
					}
					if !refused {
						refused = true
						if refusedClients.Add(1) == int64(clients) {
							allRefusedAt.Store(int64(time.Since(start)))
						}
					}
					time.Sleep(100 * time.Millisecond) // a refused client backs off
				case a.code >= 500:
					node = (node + 1) % len(c.nodes)
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	_ = w.Flush()
	_ = f.Close()
	r := fillResult{Acked: acked.Load(), AckedAtRefusal: ackedAtRefusal.Load(), Answers: answers, Errors: errs.Load(),
		Seconds: time.Since(start).Seconds()}
	if fr := firstRefusal.Load(); fr != 0 {
		r.FirstRefusalSec = time.Duration(fr).Seconds()
	}
	// On the (maybe) full ledger: a duplicate, a read, a new key.
	for _, node := range c.nodes {
		if a, err := c.post(node, "/v1/intents", map[string]any{"key": "cap-0-0", "tool": "bench.fill", "owner": "other",
			"payload": map[string]any{"p": pad(payload)}}); err == nil {
			r.DuplicateServed = a.code == http.StatusOK && a.status == "duplicate"
			if resp, err := c.hc.Get("http://" + node + "/v1/intents/cap-0-0"); err == nil {
				r.ReadServed = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			if a, err := c.post(node, "/v1/intents", map[string]any{"key": "cap-after", "tool": "bench.fill", "owner": "o",
				"payload": map[string]any{"p": "after"}}); err == nil {
				r.StillRefusing = a.status == "ledger_full"
			}
			break
		}
	}
	return r
}

type verifyResult struct {
	Acked   int      `json:"acked"`
	Lost    int      `json:"lost"`
	Sample  []string `json:"lost_sample,omitempty"`
	Present int      `json:"present"`
}

// verify lists every intent (paged, from a node that answers) and counts
// the acked keys missing.
func (c *client) verify(path string) (verifyResult, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return verifyResult{}, err
	}
	var out verifyResult
	present := map[string]bool{}
	var lastErr error
	for _, node := range c.nodes {
		cursor, ok := "", true
		clear(present)
		for {
			resp, err := c.hc.Get("http://" + node + "/v1/intents?limit=1000&prefix=cap-&cursor=" + url.QueryEscape(cursor))
			if err != nil {
				lastErr, ok = err, false
				break
			}
			var page struct {
				Intents []struct {
					Key string `json:"key"`
				} `json:"intents"`
				Next string `json:"next_cursor"`
			}
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				lastErr, ok = fmt.Errorf("list on %s: %d %v", node, resp.StatusCode, err), false
				break
			}
			for _, in := range page.Intents {
				present[in.Key] = true
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		if ok {
			lastErr = nil
			break
		}
	}
	if lastErr != nil {
		return out, lastErr
	}
	out.Present = len(present)
	for _, k := range strings.Fields(string(raw)) {
		out.Acked++
		if !present[k] {
			out.Lost++
			if len(out.Sample) < 5 {
				out.Sample = append(out.Sample, k)
			}
		}
	}
	return out, nil
}
