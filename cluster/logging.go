package cluster

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's hclog output to slog.
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []interface{}
	level   hclog.Level
}

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l.With("component", name), name: name, level: hclog.Info}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	if level < h.level {
		return
	}
	h.l.Log(context.Background(), slogLevel(level), msg, args...)
}
func (h *hclogAdapter) Trace(msg string, args ...interface{}) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...interface{}) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...interface{})  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...interface{})  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...interface{}) { h.Log(hclog.Error, msg, args...) }
func (h *hclogAdapter) IsTrace() bool                         { return h.level <= hclog.Trace }
func (h *hclogAdapter) IsDebug() bool                         { return h.level <= hclog.Debug }
func (h *hclogAdapter) IsInfo() bool                          { return h.level <= hclog.Info }
func (h *hclogAdapter) IsWarn() bool                          { return h.level <= hclog.Warn }
func (h *hclogAdapter) IsError() bool                         { return h.level <= hclog.Error }
func (h *hclogAdapter) ImpliedArgs() []interface{}            { return h.implied }
func (h *hclogAdapter) Name() string                          { return h.name }
func (h *hclogAdapter) SetLevel(level hclog.Level)            { h.level = level }
func (h *hclogAdapter) GetLevel() hclog.Level                 { return h.level }

func (h *hclogAdapter) With(args ...interface{}) hclog.Logger {
	c := *h
	c.l = h.l.With(args...)
	c.implied = append(append([]interface{}{}, h.implied...), args...)
	return &c
}

func (h *hclogAdapter) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.l = h.l.With("component", name)
	return &c
}

func (h *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(nil), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &levelWriter{l: h.l}
}

// levelWriter turns "[WARN] memberlist: ..." lines of the standard logger
// (memberlist, raft's transport) into slog records at the right level.
type levelWriter struct{ l *slog.Logger }

func (w *levelWriter) Write(p []byte) (int, error) {
	msg := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, lv := range map[string]slog.Level{
		"[DEBUG]": slog.LevelDebug, "[TRACE]": slog.LevelDebug, "[INFO]": slog.LevelInfo,
		"[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError, "[ERROR]": slog.LevelError,
	} {
		if bytes.HasPrefix(msg, []byte(prefix)) {
			level = lv
			msg = bytes.TrimSpace(msg[len(prefix):])
			break
		}
	}
	w.l.Log(context.Background(), level, string(msg))
	return len(p), nil
}

func newStdLogger(l *slog.Logger, component string) *log.Logger {
	return log.New(&levelWriter{l: l.With("component", component)}, "", 0)
}
