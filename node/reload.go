package node

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/auth"
)

// DefaultAPIKeysPoll is how often a node checks its --api-keys-file for
// changes unless Config.APIKeysPoll says otherwise.
const DefaultAPIKeysPoll = 5 * time.Second

// digestLabelLen is how many hex digits of the key set's digest the
// intentd_api_keys metric carries.
const digestLabelLen = 12

// Results of a reload, the result label of intentd_api_keys_reload_total.
const (
	reloadSuccess = "success"
	reloadError   = "error"
)

// keyReloader re-reads the node's API keys (APIKeysFile and the
// INTENTD_API_KEYS value it started with) when told to (Config.Reload,
// SIGHUP in cmd/intentd; Node.ReloadAPIKeys) and when the file's content
// changes, and swaps them into the live keyset. A configuration that does
// not validate changes nothing: the node keeps the keys it has.
type keyReloader struct {
	file, env string
	keys      *auth.Keyset // the live keyset the HTTP API checks
	log       *slog.Logger
	poll      time.Duration
	signals   <-chan os.Signal
	// onSignal, when set, runs after the keys' reload on every signal
	// (the namespace quotas reload with them).
	onSignal func()

	mu       sync.Mutex // one reload at a time
	fileHash [sha256.Size]byte
	fileErr  error // the last poll's read error, logged once

	reloads *prometheus.CounterVec
	info    *prometheus.Desc

	started bool // start ran (a failed Start never calls it)
	stop    chan struct{}
	done    chan struct{}
}

// newKeyReloader returns the reloader of keys, the keyset loadKeys
// returned (nil with auth off: no reloader).
func (n *Node) newKeyReloader(keys *auth.Keyset) *keyReloader {
	if keys == nil {
		return nil
	}
	r := &keyReloader{file: n.cfg.APIKeysFile, env: n.cfg.APIKeys, keys: keys, log: n.log,
		poll: n.cfg.APIKeysPoll, signals: n.cfg.Reload,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intentd_api_keys_reload_total",
			Help: "API key reloads (SIGHUP, or a change of --api-keys-file) by result: success (the new keys are in force) or error (the configuration did not load; the node kept its keys).",
		}, []string{"result"}),
		info: prometheus.NewDesc("intentd_api_keys",
			"API keys this node enforces; the digest label is the first 12 hex digits of the key set's SHA-256 (names, namespaces, roles, hashes, tools, prefixes): "+
				"every node of a cluster should show the same one.", []string{"digest"}, nil),
		stop: make(chan struct{}), done: make(chan struct{})}
	r.reloads.WithLabelValues(reloadSuccess)
	r.reloads.WithLabelValues(reloadError)
	if r.file != "" {
		if data, err := readKeysFile(r.file); err == nil {
			r.fileHash = sha256.Sum256(data)
		}
	}
	return r
}

// Describe implements prometheus.Collector.
func (r *keyReloader) Describe(ch chan<- *prometheus.Desc) {
	r.reloads.Describe(ch)
	ch <- r.info
}

// Collect implements prometheus.Collector.
func (r *keyReloader) Collect(ch chan<- prometheus.Metric) {
	r.reloads.Collect(ch)
	ch <- prometheus.MustNewConstMetric(r.info, prometheus.GaugeValue, float64(r.keys.Len()), shortDigest(r.keys.Digest()))
}

func shortDigest(d string) string { return d[:min(len(d), digestLabelLen)] }

// start runs the reloader until close: it reloads on every signal and on
// every change of the file's content it sees polling.
func (r *keyReloader) start() {
	r.started = true
	go func() {
		defer close(r.done)
		var tick <-chan time.Time
		if r.file != "" && r.poll > 0 {
			t := time.NewTicker(r.poll)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-r.stop:
				return
			case _, ok := <-r.signals:
				if !ok {
					r.signals = nil // a closed channel would spin
					continue
				}
				r.log.Info("reloading API keys (signal)")
				_ = r.reload()
				if r.onSignal != nil {
					r.onSignal()
				}
			case <-tick:
				r.pollFile()
			}
		}
	}()
}

// close stops the reloader and waits for it.
func (r *keyReloader) close() {
	if r == nil || !r.started {
		return
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// pollFile reloads when the file's content differs from what the node
// last read: its SHA-256, so a touch or a rewrite with the same bytes
// changes nothing, and a file caught half-written fails once and is read
// again when the writer finishes.
func (r *keyReloader) pollFile() {
	data, err := readKeysFile(r.file)
	r.mu.Lock()
	if err != nil {
		if r.fileErr == nil || r.fileErr.Error() != err.Error() {
			r.log.Error("API KEYS FILE UNREADABLE: keeping the keys loaded before", "file", r.file, "err", err)
		}
		r.fileErr = err
		r.mu.Unlock()
		return
	}
	r.fileErr = nil
	same := sha256.Sum256(data) == r.fileHash
	r.mu.Unlock()
	if same {
		return
	}
	r.log.Info("reloading API keys (the file changed)", "file", r.file)
	_ = r.reload()
}

// reload loads the configuration again and, if it validates, swaps it in.
func (r *keyReloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file != "" {
		// What this attempt read, so the poll does not retry the same bytes.
		if data, err := readKeysFile(r.file); err == nil {
			r.fileHash = sha256.Sum256(data)
		}
	}
	next, err := auth.Load(r.file, r.env)
	if errors.Is(err, auth.ErrNoKeys) {
		err = fmt.Errorf("%w: no --api-keys-file and no %s", err, auth.EnvVar)
	}
	if err != nil {
		r.reloads.WithLabelValues(reloadError).Inc()
		r.log.Error("API KEYS NOT RELOADED: the new configuration does not load; this node keeps enforcing the keys it had",
			"err", err, "keys", r.keys.Len(), "digest", r.keys.Digest())
		return fmt.Errorf("reload API keys: %w", err)
	}
	old := r.keys.Snapshot()
	r.keys.Replace(next)
	r.reloads.WithLabelValues(reloadSuccess).Inc()
	change := auth.Compare(old, next)
	r.log.Info("API keys reloaded", "keys", next.Len(), "digest", next.Digest(),
		"added", strings.Join(change.Added, ","), "removed", strings.Join(change.Removed, ","),
		"changed", strings.Join(change.Changed, ","), "unchanged", change.Empty())
	return nil
}

// readKeysFile reads a keys file as auth.LoadFile does (bounded).
func readKeysFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20+1))
}

// ReloadAPIKeys reads the node's API keys again (--api-keys-file and the
// INTENTD_API_KEYS value it started with) and, if they validate, puts
// them in force at once: requests already authenticated finish with the
// keys they started with. If they do not, the node keeps its keys and the
// error says why (it is also logged and counted). With auth off there is
// nothing to reload.
func (n *Node) ReloadAPIKeys() error {
	if n.reloader == nil {
		return errors.New("reload API keys: auth is off")
	}
	return n.reloader.reload()
}

// APIKeysDigest returns the digest of the API keys the node enforces
// (auth.Keyset.Digest; "off" with auth off).
func (n *Node) APIKeysDigest() string {
	if n.reloader == nil {
		return "off"
	}
	return n.reloader.keys.Digest()
}
