package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentledger/intentd/internal/progress"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// driver performs one claim of key by owner with payload. A nil error
// means the system answered definitely (granted, or someone else holds the
// key); anything else counts as an error.
type driver interface {
	claim(ctx context.Context, key, owner string, payload []byte) error
}

// newHTTPClient is the keep-alive client both HTTP drivers use.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
}

// intentdDriver claims through POST /v1/intents, sending each request to
// the next of bases in turn (one base: always there).
type intentdDriver struct {
	hc    *http.Client
	bases []string
	next  atomic.Uint64
}

// pick returns the next of xs, round-robin over every call.
func pick(xs []string, next *atomic.Uint64) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return xs[(next.Add(1)-1)%uint64(len(xs))]
}

func (d *intentdDriver) claim(ctx context.Context, key, owner string, payload []byte) error {
	var b bytes.Buffer
	b.Grow(len(key) + len(owner) + len(payload) + 64)
	b.WriteString(`{"key":`)
	b.WriteString(strconv.Quote(key))
	b.WriteString(`,"tool":"bench","owner":`)
	b.WriteString(strconv.Quote(owner))
	b.WriteString(`,"payload":`)
	b.Write(payload)
	b.WriteByte('}')
	code, err := post(ctx, d.hc, pick(d.bases, &d.next)+"/v1/intents", &b)
	if err != nil {
		return err
	}
	switch code {
	case http.StatusCreated, http.StatusOK, http.StatusConflict: // granted, same owner/duplicate, in_flight
		return nil
	}
	return fmt.Errorf("intentd: HTTP %d", code)
}

// etcdGRPCDriver claims with a compare-and-put transaction over gRPC.
type etcdGRPCDriver struct{ cli *clientv3.Client }

func (d *etcdGRPCDriver) claim(ctx context.Context, key, _ string, payload []byte) error {
	_, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(payload))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd txn: %w", err)
	}
	return nil
}

// etcdHTTPDriver sends the same transaction as JSON to etcd's gRPC
// gateway, to the next of urls in turn.
type etcdHTTPDriver struct {
	hc   *http.Client
	urls []string
	next atomic.Uint64
}

func (d *etcdHTTPDriver) claim(ctx context.Context, key, _ string, payload []byte) error {
	k := base64.StdEncoding.EncodeToString([]byte(key))
	v := base64.StdEncoding.EncodeToString(payload)
	var b bytes.Buffer
	b.Grow(2*len(k) + len(v) + 200)
	b.WriteString(`{"compare":[{"key":"`)
	b.WriteString(k)
	b.WriteString(`","target":"CREATE","result":"EQUAL","create_revision":"0"}],"success":[{"request_put":{"key":"`)
	b.WriteString(k)
	b.WriteString(`","value":"`)
	b.WriteString(v)
	b.WriteString(`"}}],"failure":[{"request_range":{"key":"`)
	b.WriteString(k)
	b.WriteString(`"}}]}`)
	code, err := post(ctx, d.hc, pick(d.urls, &d.next), &b)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("etcd gateway: HTTP %d", code)
	}
	return nil
}

// post sends a JSON body and drains the answer so the connection is reused.
func post(ctx context.Context, hc *http.Client, url string, body *bytes.Buffer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, nil
}

// levelSpec names one measured level.
type levelSpec struct {
	seq       int // 1-based position in the run, for the progress line
	total     int
	rep       int
	frontEnd  string
	mode      string
	routing   string // leader or spread
	clients   int
	claimants int
	prefix    string // unique per level, so every level claims fresh keys
	keyBytes  int
	payload   []byte
	warmup    time.Duration
	duration  time.Duration
	pids      []int // server processes whose CPU is measured
	leaderPid int   // the leader's, also measured alone
}

// levelResult is one level's measurement.
type levelResult struct {
	System string `json:"system"`
	Mode   string `json:"mode"`
	// Routing is where the clients sent: leader, or spread over all
	// nodes ("" in results from before spread existed: leader).
	Routing    string  `json:"routing,omitempty"`
	Clients    int     `json:"clients"`
	Rep        int     `json:"rep"`
	Ops        int     `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	P999ms     float64 `json:"p999_ms"`
	Errors     int64   `json:"errors"`
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUPer1k   float64 `json:"cpu_seconds_per_1k_ops"`
	// LeaderCPUPer1k is the leader process's own CPU per 1,000 ops.
	LeaderCPUPer1k float64 `json:"leader_cpu_seconds_per_1k_ops,omitempty"`
	// DriverCPUPer1k is the load generator's own CPU (this process) per
	// 1,000 ops: it shares the machine's cores with the servers, so a
	// client library that costs more leaves the servers less.
	DriverCPUPer1k float64 `json:"driver_cpu_seconds_per_1k_ops,omitempty"`
	Load1Start     float64 `json:"load1_start"`
	Load1End       float64 `json:"load1_end"`
	FirstError     string  `json:"first_error,omitempty"`
	// FsyncPerSec is the preallocated-append fdatasync rate measured just
	// before a 1-client level (0 otherwise), for its fsync-bound limit.
	FsyncPerSec float64 `json:"fsync_per_sec,omitempty"`
	Start       string  `json:"start"`
}

// keyOf builds a key of exactly n bytes: prefix/id/zero-padded seq.
func keyOf(prefix string, id, seq, n int) string {
	head := fmt.Sprintf("%s/%05d/", prefix, id)
	s := strconv.Itoa(seq)
	pad := n - len(head) - len(s)
	if pad < 0 {
		return (head + s)[:n]
	}
	return head + strings.Repeat("0", pad) + s
}

// runLevel runs spec.clients closed-loop clients for warmup+duration and
// measures the operations that started after the warm-up and finished
// before the end. Server CPU is read from /proc over the measured window.
func runLevel(ctx context.Context, d driver, spec levelSpec, prog *progress.Writer) levelResult {
	res := levelResult{System: spec.frontEnd, Mode: spec.mode, Routing: spec.routing, Clients: spec.clients, Rep: spec.rep,
		Load1Start: loadAvg(), Start: time.Now().UTC().Format(time.RFC3339)}
	start := time.Now()
	measureFrom := start.Add(spec.warmup)
	end := measureFrom.Add(spec.duration)
	lctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      atomic.Int64
		firstErr  atomic.Value
		done      atomic.Int64
		wg        sync.WaitGroup
		cpu0      atomic.Int64
		leader0   atomic.Int64
		self0     atomic.Int64
	)
	cpu0.Store(-1)
	leader0.Store(-1)
	self0.Store(-1)
	cpuTimer := time.AfterFunc(spec.warmup, func() {
		if t, err := cpuTicks(spec.pids); err == nil {
			cpu0.Store(t)
		}
		if t, err := cpuTicks([]int{spec.leaderPid}); err == nil {
			leader0.Store(t)
		}
		if t, err := cpuTicks([]int{os.Getpid()}); err == nil {
			self0.Store(t)
		}
	})
	defer cpuTimer.Stop()
	stopProgress := showStatus(prog, func() string {
		return fmt.Sprintf("[%d/%d] rep %d %-9s %-9s %-6s clients=%-3d %4.0fs/%.0fs ops=%d errors=%d load=%.1f",
			spec.seq, spec.total, spec.rep, spec.frontEnd, spec.mode, spec.routing, spec.clients,
			time.Since(start).Seconds(), (spec.warmup + spec.duration).Seconds(), done.Load(), errs.Load(), loadAvg())
	})
	for c := 0; c < spec.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			id := c
			if spec.mode == "contended" {
				id = c / spec.claimants // a group of claimants walks the same keys
			}
			var local []time.Duration
			for i := 0; lctx.Err() == nil; i++ {
				key := keyOf(spec.prefix, id, i, spec.keyBytes)
				owner := "bench/" + strconv.Itoa(c) + "/" + strconv.Itoa(i)
				octx, ocancel := context.WithTimeout(lctx, 10*time.Second)
				t0 := time.Now()
				err := d.claim(octx, key, owner, spec.payload)
				lat := time.Since(t0)
				ocancel()
				if lctx.Err() != nil {
					break // the level ended mid-operation: not counted
				}
				done.Add(1)
				if err != nil {
					if errs.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
					continue
				}
				if !t0.Before(measureFrom) {
					local = append(local, lat)
				}
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	cpu1, cpuErr := cpuTicks(spec.pids)
	leader1, leaderErr := cpuTicks([]int{spec.leaderPid})
	self1, selfErr := cpuTicks([]int{os.Getpid()})
	stopProgress()
	slices.Sort(latencies)
	res.Ops = len(latencies)
	res.OpsPerSec = float64(len(latencies)) / spec.duration.Seconds()
	res.P50ms, res.P99ms, res.P999ms = pct(latencies, 0.50), pct(latencies, 0.99), pct(latencies, 0.999)
	res.Errors = errs.Load()
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	if c0 := cpu0.Load(); c0 >= 0 && cpuErr == nil {
		res.CPUSeconds = float64(cpu1-c0) / 100
		if res.Ops > 0 {
			res.CPUPer1k = res.CPUSeconds / float64(res.Ops) * 1000
		}
	}
	if l0 := leader0.Load(); l0 >= 0 && leaderErr == nil && res.Ops > 0 {
		res.LeaderCPUPer1k = float64(leader1-l0) / 100 / float64(res.Ops) * 1000
	}
	if s0 := self0.Load(); s0 >= 0 && selfErr == nil && res.Ops > 0 {
		res.DriverCPUPer1k = float64(self1-s0) / 100 / float64(res.Ops) * 1000
	}
	res.Load1End = loadAvg()
	return res
}

// pct returns the p-quantile of sorted latencies in milliseconds.
func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// showStatus has prog show status() every second (prog thins it to a
// plain line every few seconds when it is not a terminal) until stop is
// called, which erases it from a terminal.
func showStatus(prog *progress.Writer, status func() string) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				prog.Clear()
				return
			case <-t.C:
				prog.Status("%s", status())
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// checkDriver makes one claim twice to see the system answers as expected
// (a grant, then a definite refusal or lookup).
func checkDriver(ctx context.Context, d driver, key string, payload []byte) error {
	for i := 0; i < 2; i++ {
		if err := d.claim(ctx, key, "bench/check/"+strconv.Itoa(i), payload); err != nil {
			return fmt.Errorf("smoke claim %d: %w", i, err)
		}
	}
	return nil
}

// payloadOf is a JSON object of exactly n bytes ({"d":"xxx…"}).
func payloadOf(n int) []byte {
	p, _ := json.Marshal(map[string]string{"d": strings.Repeat("x", n-8)})
	if len(p) != n {
		panic(errors.New("payload size"))
	}
	return p
}
