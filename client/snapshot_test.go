package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// snapshotBytes stands for a snapshot: the client moves the bytes, the
// nodes and intentctl check them.
var snapshotBytes = []byte("{\"format\":\"intentd-ledger\",\"version\":3,\"index\":42,\"count\":2}\nframes\n{\"sha256\":\"x\"}\n")

// fakeSnapshots serves snapshotBytes and takes back only those bytes.
type fakeSnapshots struct {
	mu       sync.Mutex
	intents  int
	restores int
}

type fakeSnapshot struct{}

func (fakeSnapshot) Index() uint64 { return 42 }
func (fakeSnapshot) Intents() int  { return 2 }
func (fakeSnapshot) Write(w io.Writer) (cluster.SnapshotInfo, error) {
	n, err := w.Write(snapshotBytes)
	return cluster.SnapshotInfo{Index: 42, Intents: 2, Bytes: int64(n)}, err
}

func (f *fakeSnapshots) TakeSnapshot(context.Context) (cluster.Snapshot, error) {
	return fakeSnapshot{}, nil
}

func (f *fakeSnapshots) Restore(_ context.Context, data []byte, force bool) (cluster.SnapshotInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores++
	switch {
	case !bytes.Equal(data, snapshotBytes):
		return cluster.SnapshotInfo{}, fmt.Errorf("%w: not the snapshot", fsm.ErrBadSnapshot)
	case f.intents > 0 && !force:
		return cluster.SnapshotInfo{}, cluster.ErrNotEmpty
	}
	f.intents = 2
	return cluster.SnapshotInfo{Index: 42, Intents: 2, Digest: "d", Bytes: int64(len(data))}, nil
}

// snapshotNode is an API server whose snapshots are snaps; requests counts
// what it was asked, by method and path.
func snapshotNode(t *testing.T, snaps *fakeSnapshots, wrap func(http.Handler) http.Handler) (*httptest.Server, *requestLog) {
	t.Helper()
	mem := ledgertest.NewMemory(epoch)
	h := httpapi.New(httpapi.Config{Service: ledgertest.NewService(t, mem, ledger.Config{}), Cluster: readyCluster{}, NodeID: "n1",
		Now: mem.Now, Snapshots: snaps}).Handler()
	if wrap != nil {
		h = wrap(h)
	}
	log := &requestLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, log
}

// requestLog records the requests a server saw.
type requestLog struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r.Clone(context.Background()))
}

// count is how many requests of method to path the server saw.
func (l *requestLog) count(method, path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.seen {
		if r.Method == method && r.URL.Path == path {
			n++
		}
	}
	return n
}

func TestSaveSnapshot(t *testing.T) {
	srv, _ := snapshotNode(t, &fakeSnapshots{}, nil)
	c := newClient(t, []string{srv.URL})
	var buf bytes.Buffer
	info, err := c.SaveSnapshot(context.Background(), &buf)
	if err != nil || !bytes.Equal(buf.Bytes(), snapshotBytes) {
		t.Fatalf("save = %+v, %v; body %q", info, err, buf.Bytes())
	}
	if info != (client.SnapshotInfo{Index: 42, Intents: 2, Bytes: int64(len(snapshotBytes))}) {
		t.Errorf("info = %+v", info)
	}
}

// A snapshot comes as application/octet-stream (or with no type);
// anything else is not a snapshot and is refused before anything is
// written.
func TestSaveSnapshotContentTypes(t *testing.T) {
	for contentType, ok := range map[string]bool{
		"application/x-ndjson":                   false,
		"application/octet-stream":               true,
		"application/octet-stream; charset=none": true,
		"":                                       true,
		"text/html; charset=utf-8":               false,
		"application/json":                       false,
	} {
		t.Run(contentType, func(t *testing.T) {
			srv, _ := snapshotNode(t, &fakeSnapshots{}, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/v1/admin/snapshot" {
						next.ServeHTTP(w, r)
						return
					}
					w.Header()["Content-Type"] = nil // no sniffing either
					if contentType != "" {
						w.Header().Set("Content-Type", contentType)
					}
					w.Header().Set("X-Intentd-Snapshot-Index", "42")
					w.WriteHeader(http.StatusOK)
					_, _ = w.Write(snapshotBytes)
				})
			})
			var buf bytes.Buffer
			info, err := newClient(t, []string{srv.URL}).SaveSnapshot(context.Background(), &buf)
			if ok {
				if err != nil || info.Index != 42 || !bytes.Equal(buf.Bytes(), snapshotBytes) {
					t.Fatalf("save = %+v, %v; body %q", info, err, buf.Bytes())
				}
				return
			}
			if !errors.Is(err, client.ErrBadSnapshot) || buf.Len() != 0 {
				t.Fatalf("save of a %s answer = %v, %d bytes written; want ErrBadSnapshot and nothing", contentType, err, buf.Len())
			}
		})
	}
}

// A download goes through the SDK's routing: past a node that cannot
// serve it, to one that can. Once the body streams, a cut is returned and
// not retried.
func TestSaveSnapshotRouting(t *testing.T) {
	var busyHits atomic.Int64
	busy := fixed(t, http.StatusServiceUnavailable, "not_leader", &busyHits)
	good, goodLog := snapshotNode(t, &fakeSnapshots{}, nil)
	var buf bytes.Buffer
	c := newClient(t, []string{busy.URL, good.URL}, client.WithDiscovery(false))
	if _, err := c.SaveSnapshot(context.Background(), &buf); err != nil || !bytes.Equal(buf.Bytes(), snapshotBytes) {
		t.Fatalf("save past a busy node = %v; body %q", err, buf.Bytes())
	}
	if busyHits.Load() != 1 || goodLog.count(http.MethodGet, "/v1/admin/snapshot") != 1 {
		t.Errorf("hits: busy %d, good %d; want 1 and 1", busyHits.Load(), goodLog.count(http.MethodGet, "/v1/admin/snapshot"))
	}

	cut, cutLog := snapshotNode(t, &fakeSnapshots{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/admin/snapshot" {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", fmt.Sprint(len(snapshotBytes)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(snapshotBytes[:10])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // cut the body
		})
	})
	buf.Reset()
	c = newClient(t, []string{cut.URL, good.URL}, client.WithDiscovery(false))
	info, err := c.SaveSnapshot(context.Background(), &buf)
	if err == nil || !strings.Contains(err.Error(), "cut after 10 bytes") || info.Bytes != 10 {
		t.Fatalf("cut save = %+v, %v", info, err)
	}
	if n := cutLog.count(http.MethodGet, "/v1/admin/snapshot"); n != 1 || goodLog.count(http.MethodGet, "/v1/admin/snapshot") != 1 {
		t.Errorf("a cut download was retried (%d attempts at the cut node)", n)
	}
}

func TestRestoreSnapshot(t *testing.T) {
	snaps := &fakeSnapshots{}
	srv, log := snapshotNode(t, snaps, nil)
	c := newClient(t, []string{srv.URL}, client.WithRetries(3))
	ctx := context.Background()

	info, err := c.RestoreSnapshot(ctx, snapshotBytes, false)
	if err != nil || info.Index != 42 || info.Intents != 2 || info.Bytes != int64(len(snapshotBytes)) {
		t.Fatalf("restore = %+v, %v", info, err)
	}
	_, err = c.RestoreSnapshot(ctx, snapshotBytes, false)
	if p := requireOnly(t, err, "ErrNotEmpty"); p.Status != http.StatusConflict || p.Detail == "" {
		t.Errorf("restore into a ledger with intents: %+v", p)
	}
	if _, err := c.RestoreSnapshot(ctx, snapshotBytes, true); err != nil {
		t.Fatalf("restore with force: %v", err)
	}
	_, err = c.RestoreSnapshot(ctx, []byte("not a snapshot\n"), true)
	if p := requireOnly(t, err, "ErrBadSnapshot"); p.Status != http.StatusUnprocessableEntity {
		t.Errorf("restore of a bad snapshot: %+v", p)
	}
	if got := log.count(http.MethodPost, "/v1/admin/snapshot/restore"); got != 4 || snaps.restores != 4 {
		t.Errorf("%d restore requests (%d restores), want 4", got, snaps.restores)
	}
	for _, r := range log.seen {
		if r.URL.Path == "/v1/admin/snapshot/restore" && r.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("restore sent as %q", r.Header.Get("Content-Type"))
		}
	}
}

// A restore is sent once: a repeat could replace writes made after the
// first one, so not even an answer that invites a retry brings one.
func TestRestoreSnapshotIsNotRetried(t *testing.T) {
	var hits atomic.Int64
	busy := fixed(t, http.StatusServiceUnavailable, "no_leader", &hits)
	other, otherLog := snapshotNode(t, &fakeSnapshots{}, nil)
	c := newClient(t, []string{busy.URL, other.URL}, client.WithDiscovery(false), client.WithRetries(3))
	_, err := c.RestoreSnapshot(context.Background(), snapshotBytes, false)
	requireOnly(t, err, "ErrNoLeader")
	if hits.Load() != 1 || otherLog.count(http.MethodPost, "/v1/admin/snapshot/restore") != 0 {
		t.Errorf("restore sent %d times to the busy node and %d to the other; want once, to the first",
			hits.Load(), otherLog.count(http.MethodPost, "/v1/admin/snapshot/restore"))
	}
}
