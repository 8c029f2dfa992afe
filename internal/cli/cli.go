// Package cli holds what the project's commands share at their edge:
// their logger, flags set from environment variables, and comma-separated
// list flags. Each command still owns its flags.
package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger is a command's structured logger: format "text" or "json",
// level "debug", "info", "warn" or "error" (slog's names).
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

// EnvName is the environment variable that sets flag name: prefix, then
// the name in upper case with dashes as underscores (INTENTD_ + data-dir
// is INTENTD_DATA_DIR).
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// SetFromEnv sets every flag of fs whose environment variable (EnvName)
// is not empty, before fs.Parse, so a flag on the command line still wins.
// It returns the names of the flags it set, and the first value a flag
// refused.
func SetFromEnv(fs *flag.FlagSet, prefix string, getenv func(string) string) (map[string]bool, error) {
	set := map[string]bool{}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(prefix, f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			if err == nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
			}
			return
		}
		set[f.Name] = true
	})
	return set, err
}

// SplitList splits a comma-separated flag value, trimming spaces and
// dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
