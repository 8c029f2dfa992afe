package mcpgate

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of an upstream's connection loop.
const (
	connectTimeout   = 30 * time.Second
	listTimeout      = 30 * time.Second
	reconnectInitial = 250 * time.Millisecond
	reconnectMax     = 30 * time.Second
)

// upstream is the gate's connection to one MCP server: it connects (again
// after the server dies or the connection drops, with backoff), lists the
// tools and lists them again on notifications/tools/list_changed, and
// holds the session calls are sent on.
type upstream struct {
	g      *Gate
	spec   Upstream
	prefix string
	log    *slog.Logger
	client *mcp.Client

	mu    sync.Mutex
	cs    *mcp.ClientSession // nil while disconnected
	tools []*mcp.Tool        // the last listing

	refresh chan struct{} // a list_changed arrived (coalesced)
	tried   chan struct{} // closed after the first connection attempt
	once    sync.Once
}

func newUpstream(g *Gate, spec Upstream, prefix string) *upstream {
	u := &upstream{g: g, spec: spec, prefix: prefix, log: g.cfg.Logger.With("upstream", spec.Name),
		refresh: make(chan struct{}, 1), tried: make(chan struct{})}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "intent-mcp", Version: g.cfg.Version}, &mcp.ClientOptions{
		// The gate relays no server-to-client requests (roots, sampling,
		// elicitation) yet, so it claims no such capability.
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { u.requestRefresh() },
		ProgressNotificationHandler: g.progress.relay,
		// Input requests (SEP-2322) come back to the gate, which does not
		// relay them yet (needs_input).
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	return u
}

// session returns the connected session, or nil.
func (u *upstream) session() *mcp.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cs
}

// listing returns the last tool listing.
func (u *upstream) listing() []*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.tools)
}

func (u *upstream) requestRefresh() {
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// maxIdleConnsPerUpstream is how many idle HTTP connections the gate
// keeps to a streamable-HTTP upstream.
const maxIdleConnsPerUpstream = 256

// transport makes the transport of one connection.
func (u *upstream) transport() mcp.Transport {
	if u.spec.Transport != nil {
		return u.spec.Transport()
	}
	if u.spec.URL != "" {
		// net/http keeps 2 idle connections per host by default: with
		// more calls at once than that, most would dial a new one.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = maxIdleConnsPerUpstream
		hc := &http.Client{Transport: tr}
		if len(u.spec.Headers) > 0 {
			hc.Transport = headerTransport{h: u.spec.Headers, base: tr}
		}
		return &mcp.StreamableClientTransport{Endpoint: u.spec.URL, HTTPClient: hc}
	}
	cmd := exec.Command(u.spec.Command[0], u.spec.Command[1:]...)
	cmd.Dir = u.spec.Dir
	if len(u.spec.Env) > 0 {
		cmd.Env = os.Environ()
		for k, v := range u.spec.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stderr = u.g.cfg.UpstreamStderr
	return &mcp.CommandTransport{Command: cmd}
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	h    map[string]string
	base http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// run keeps the upstream connected until ctx ends.
func (u *upstream) run(ctx context.Context) {
	defer u.once.Do(func() { close(u.tried) })
	pause := reconnectInitial
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, max(connectTimeout, u.g.cfg.StartTimeout))
		cs, err := u.client.Connect(cctx, u.transport(), nil)
		cancel()
		if err != nil {
			u.once.Do(func() { close(u.tried) })
			u.log.Warn("cannot connect to the upstream; retrying", "err", err, "in", pause)
			if sleep(ctx, pause) != nil {
				return
			}
			pause = min(2*pause, reconnectMax)
			continue
		}
		pause = reconnectInitial
		u.mu.Lock()
		u.cs = cs
		u.mu.Unlock()
		u.log.Info("upstream connected", "session", cs.ID())
		u.list(ctx, cs)
		u.once.Do(func() { close(u.tried) })
		ended := make(chan error, 1)
		go func() { ended <- cs.Wait() }()
	serving:
		for {
			select {
			case <-ctx.Done():
				_ = cs.Close()
				<-ended
				break serving
			case err := <-ended:
				u.log.Warn("the upstream connection ended; reconnecting", "err", err)
				_ = cs.Close() // reap a command
				break serving
			case <-u.refresh:
				u.list(ctx, cs)
			}
		}
		u.mu.Lock()
		u.cs = nil
		u.mu.Unlock()
		if ctx.Err() == nil && sleep(ctx, pause) != nil {
			return
		}
	}
}

// list reads the upstream's tools and lets the gate update what it lists.
func (u *upstream) list(ctx context.Context, cs *mcp.ClientSession) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			u.log.Warn("listing the upstream's tools failed; keeping the last listing", "err", err)
			return
		}
		tools = append(tools, t)
	}
	u.mu.Lock()
	u.tools = tools
	u.mu.Unlock()
	u.log.Debug("upstream tools listed", "tools", len(tools))
	u.g.syncTools()
}

// waitTried waits for the first connection attempt to end (either way).
func (u *upstream) waitTried(ctx context.Context) error {
	select {
	case <-u.tried:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("upstream %s: %w", u.spec.Name, ctx.Err())
	}
}
