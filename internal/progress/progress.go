// Package progress writes the progress of a long-running command so that
// people can read it where it lands: on a terminal a status line is
// redrawn in place; into a file, a pipe or a CI log every line is plain
// text ending in a newline, and status lines are thinned out to one every
// few seconds. The bench module imports it too (it requires this module
// through a replace of ../).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is the least time between two status lines written to
// something other than a terminal.
const DefaultInterval = 5 * time.Second

// redraw returns the cursor to the start of the line and erases it.
const redraw = "\r\033[K"

// Config configures a Writer made with NewConfig.
type Config struct {
	// Terminal redraws the status line in place. Otherwise every line is
	// plain and status lines are thinned to one per Interval.
	Terminal bool
	// Interval is the least time between two plain status lines; 0 means
	// DefaultInterval.
	Interval time.Duration
	// Now is the clock that spaces plain status lines; nil means time.Now.
	Now func() time.Time
}

// Writer writes a command's status line and event lines to one output. It
// is safe for concurrent use.
type Writer struct {
	w        io.Writer
	terminal bool
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	last  time.Time // when the last plain status line was written
	wrote bool      // a plain status line was written (last is set)
	drawn bool      // a status line stands on the terminal, without a newline
}

// New returns a Writer to w that redraws only if w is a terminal (see
// IsTerminal).
func New(w io.Writer) *Writer {
	return NewConfig(w, Config{Terminal: IsTerminal(w)})
}

// NewConfig returns a Writer to w configured by c.
func NewConfig(w io.Writer, c Config) *Writer {
	p := &Writer{w: w, terminal: c.Terminal, interval: c.Interval, now: c.Now}
	if p.interval <= 0 {
		p.interval = DefaultInterval
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// IsTerminal reports whether w is a character device: a terminal (or
// /dev/null, where redrawing does no harm). Anything that is not an
// *os.File is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Terminal reports whether the Writer redraws its status line.
func (p *Writer) Terminal() bool { return p.terminal }

// Status shows the command's current state, formatted as by fmt.Sprintf
// (one line; a trailing newline is dropped). On a terminal it replaces the
// status line shown before. Otherwise it is written as a plain line if
// none was written in the last interval, and dropped if one was.
func (p *Writer) Status(format string, args ...any) {
	line := oneLine(fmt.Sprintf(format, args...))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		_, _ = io.WriteString(p.w, redraw+line)
		p.drawn = true
		return
	}
	now := p.now()
	if p.wrote && now.Sub(p.last) < p.interval {
		return
	}
	p.last, p.wrote = now, true
	_, _ = io.WriteString(p.w, line+"\n")
}

// Event writes a line that must not be lost (a fault injected, a phase
// done, an error), formatted as by fmt.Sprintf and ended with exactly one
// newline. On a terminal it first erases the status line; the next Status
// draws it again below.
func (p *Writer) Event(format string, args ...any) {
	_, _ = p.Write([]byte(oneLine(fmt.Sprintf(format, args...)) + "\n"))
}

// Write writes b as event text (it should hold whole lines): on a terminal
// a status line is erased first. It lets a Writer stand in for the output
// in code that logs with fmt.Fprintf.
func (p *Writer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eraseLocked()
	n, err := p.w.Write(b)
	if err != nil {
		return n, fmt.Errorf("progress: %w", err)
	}
	return n, nil
}

// Clear erases the status line from a terminal, so that what follows
// starts on a clean line. It writes nothing to anything else.
func (p *Writer) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eraseLocked()
}

func (p *Writer) eraseLocked() {
	if p.drawn {
		_, _ = io.WriteString(p.w, redraw)
		p.drawn = false
	}
}

// oneLine drops the trailing newlines of s.
func oneLine(s string) string {
	return strings.TrimRight(s, "\n")
}
