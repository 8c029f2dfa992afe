package mcpgate

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRouter relays upstreams' progress notifications to the callers
// they are about. Each upstream call whose caller sent a progress token
// gets a token of the gate's own (a caller's token is only unique within
// its session, and an upstream serves every session); the router maps it
// back to the caller's session and token.
type progressRouter struct {
	mu    sync.Mutex
	next  uint64
	sinks map[string]progressSink
}

// progressSink is where one upstream call's progress goes: the caller's
// session and token, and the context of its request (notifications about
// a request travel on that request's stream).
type progressSink struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
}

func newProgressRouter() *progressRouter {
	return &progressRouter{sinks: map[string]progressSink{}}
}

// register returns the upstream token of a caller's progress token and the
// function that forgets it.
func (r *progressRouter) register(ctx context.Context, session *mcp.ServerSession, token any) (string, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	up := fmt.Sprintf("intent-mcp/%d/%d", os.Getpid(), r.next)
	r.sinks[up] = progressSink{ctx: ctx, session: session, token: token}
	return up, func() {
		r.mu.Lock()
		delete(r.sinks, up)
		r.mu.Unlock()
	}
}

// relay sends an upstream's progress notification to its caller; one
// with an unknown token (its call is over) is dropped.
func (r *progressRouter) relay(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	r.mu.Lock()
	sink, ok := r.sinks[tok]
	r.mu.Unlock()
	if !ok || sink.session == nil {
		return
	}
	_ = sink.session.NotifyProgress(sink.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: sink.token, Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message,
	})
}
