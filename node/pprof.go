package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/intentledger/intentd/internal/probe"
)

// debugServer serves Go's profiling endpoints (/debug/pprof/...) on their
// own listener, apart from the API, when --pprof names an address. It is
// opt-in: profiles reveal internals and cost CPU while being taken, so bind
// it to loopback or a private interface.
type debugServer struct {
	srv    *http.Server
	ln     net.Listener
	served chan error
}

// startDebugServer listens on addr and serves pprof until close.
func startDebugServer(addr string, log *slog.Logger) (*debugServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --pprof: %w", err)
	}
	d := &debugServer{ln: ln, served: make(chan error, 1), srv: &http.Server{
		Handler:           probe.PprofMux(),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	go func() { d.served <- d.srv.Serve(ln) }()
	log.Warn("pprof enabled: profiling endpoints served", "addr", ln.Addr().String())
	return d, nil
}

// Addr is the bound address.
func (d *debugServer) Addr() string { return d.ln.Addr().String() }

// close stops the listener (a profile being taken is cut short).
func (d *debugServer) close() error {
	if err := d.srv.Close(); err != nil {
		return fmt.Errorf("pprof server: %w", err)
	}
	if err := <-d.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("pprof serve: %w", err)
	}
	return nil
}
