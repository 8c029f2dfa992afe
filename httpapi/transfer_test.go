package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// transferServer serves a download of size bytes and an upload that
// counts what it received, under server timeouts of limit; stretch
// chooses whether the handlers use transfer's rolling deadlines.
func transferServer(t *testing.T, size int, limit time.Duration, stretch bool) string {
	t.Helper()
	e := echo.New()
	e.GET("/down", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderContentType, "application/octet-stream")
		c.Response().WriteHeader(http.StatusOK)
		var w io.Writer = c.Response()
		if stretch {
			w = newTransfer(c).writer(w)
		}
		_, err := w.Write(make([]byte, size))
		return err
	})
	e.POST("/up", func(c echo.Context) error {
		var r io.Reader = c.Request().Body
		if stretch {
			r = newTransfer(c).reader(r)
		}
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return c.String(http.StatusBadRequest, err.Error())
		}
		return c.JSON(http.StatusOK, map[string]int64{"received": n})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e, ReadTimeout: limit, WriteTimeout: limit}
	go func() { _ = srv.Serve(smallBuffers{ln.(*net.TCPListener)}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// smallBuffers gives every accepted connection a small kernel send buffer,
// so what the server writes waits for the reader instead of vanishing into
// loopback's multi-megabyte buffers before a deadline could matter.
type smallBuffers struct{ *net.TCPListener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteBuffer(transferChunk)
	return c, nil
}

// slowClient reads through a small kernel receive buffer, for the same reason.
var slowClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		_ = c.(*net.TCPConn).SetReadBuffer(transferChunk)
	}
	return c, err
}}}

// slowReader hands out its bytes in pieces of step with a pause before
// each: a slow link, whose whole transfer outlasts the server's timeout
// while every piece arrives well within it.
type slowReader struct {
	left  int
	step  int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := min(len(p), s.step, s.left)
	clear(p[:n])
	s.left -= n
	return n, nil
}

// The server's ReadTimeout and WriteTimeout bound a whole request, which
// cut off a large snapshot or audit export on a slow link (finding 9 of
// the trust-boundary review: 90 s for a download, 30 s for an upload).
// While bytes move, each chunk now gets the timeout afresh; the control
// shows the same transfer cut off without that.
func TestLongTransfersOutlastTheServerTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("paces transfers over a second of wall time")
	}
	t.Parallel()
	const (
		limit = 500 * time.Millisecond
		size  = 24 * transferChunk // 1.5 MiB, moved 64 KiB per 40 ms: ~1 s in all
		pause = 40 * time.Millisecond
	)
	download := func(base string) (int64, error) {
		resp, err := slowClient.Get(base + "/down")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var got int64
		buf := make([]byte, transferChunk)
		for {
			time.Sleep(pause)
			n, err := io.ReadFull(resp.Body, buf)
			got += int64(n)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return got, nil
			}
			if err != nil {
				return got, err
			}
		}
	}
	upload := func(base string) (string, error) {
		resp, err := slowClient.Post(base+"/up", "application/octet-stream", &slowReader{left: size, step: transferChunk, pause: pause})
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(bytes.TrimSpace(body)), err
	}

	t.Run("stretched", func(t *testing.T) {
		base := transferServer(t, size, limit, true)
		if got, err := download(base); err != nil || got != size {
			t.Fatalf("slow download of %d bytes under a %v write timeout: got %d, %v", size, limit, got, err)
		}
		if got, err := upload(base); err != nil || got != `{"received":1572864}` {
			t.Fatalf("slow upload of %d bytes under a %v read timeout: %q, %v", size, limit, got, err)
		}
	})
	t.Run("control: without rolling deadlines the server cuts them off", func(t *testing.T) {
		base := transferServer(t, size, limit, false)
		if got, err := download(base); err == nil && got == size {
			t.Fatalf("the whole %d bytes arrived past a %v write timeout: the test cannot tell a cut transfer", size, limit)
		}
		if got, err := upload(base); err == nil && got == `{"received":1572864}` {
			t.Fatalf("the whole upload arrived past a %v read timeout: the test cannot tell a cut transfer", limit)
		}
	})
}
