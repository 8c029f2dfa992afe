package httpapi

import (
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// transfer stretches the server's read and write deadlines over one long
// transfer (a snapshot download or upload, an export): the server's
// ReadTimeout and WriteTimeout bound a whole request, which would cut a
// multi-GB snapshot on a slow link, so while bytes move each chunk gets
// the server's timeout afresh, and a transfer that stalls for that long
// still fails. Its methods do nothing when the server sets no timeout (or
// the request came from elsewhere than an http.Server).
type transfer struct {
	rc *http.ResponseController
	// readTimeout and writeTimeout are the server's (0: none).
	readTimeout, writeTimeout time.Duration
}

// transferChunk bounds what one write hands the connection under one
// deadline, so a large write on a slow link is not one long stall.
const transferChunk = 64 << 10

// newTransfer returns the deadlines of c's request.
func newTransfer(c echo.Context) *transfer {
	t := &transfer{rc: http.NewResponseController(c.Response())}
	if srv, ok := c.Request().Context().Value(http.ServerContextKey).(*http.Server); ok {
		t.readTimeout, t.writeTimeout = srv.ReadTimeout, srv.WriteTimeout
	}
	return t
}

// extendWrite gives the response the server's WriteTimeout from now.
func (t *transfer) extendWrite() {
	if t.writeTimeout > 0 {
		_ = t.rc.SetWriteDeadline(time.Now().Add(t.writeTimeout)) // http.ErrNotSupported: nothing to extend
	}
}

// extendRead gives the request body the server's ReadTimeout from now.
func (t *transfer) extendRead() {
	if t.readTimeout > 0 {
		_ = t.rc.SetReadDeadline(time.Now().Add(t.readTimeout))
	}
}

// working lifts the write deadline while the node works on a transfer it
// has received (the request context still ends it if the client leaves).
func (t *transfer) working() {
	if t.writeTimeout > 0 {
		_ = t.rc.SetWriteDeadline(time.Time{})
	}
}

// writer returns w writing in chunks of at most transferChunk, each with
// a fresh write deadline.
func (t *transfer) writer(w io.Writer) io.Writer {
	if t.writeTimeout <= 0 {
		return w
	}
	return transferWriter{t: t, w: w}
}

// reader returns r with a fresh read deadline for each read (a read
// returns what has arrived, so it waits for the next chunk at most that
// long); the write deadline moves along, so the answer can still be
// written after a long upload.
func (t *transfer) reader(r io.Reader) io.Reader {
	if t.readTimeout <= 0 && t.writeTimeout <= 0 {
		return r
	}
	return transferReader{t: t, r: r}
}

type transferWriter struct {
	t *transfer
	w io.Writer
}

func (tw transferWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), transferChunk)]
		tw.t.extendWrite()
		n, err := tw.w.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

type transferReader struct {
	t *transfer
	r io.Reader
}

func (tr transferReader) Read(p []byte) (int, error) {
	tr.t.extendRead()
	tr.t.extendWrite()
	return tr.r.Read(p)
}
