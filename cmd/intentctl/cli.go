package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/internal/tlsutil"
)

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// globals are the flags every command accepts.
type globals struct {
	addr    string
	output  string
	timeout time.Duration
	retries int
	// TLS (httpClient): CA bundle, client certificate and key.
	ca, cert, key string
	// apiKey is sent as a bearer token (client.WithAPIKey).
	apiKey string
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "comma separated node addresses")
	fs.StringVar(&g.output, "output", g.output, "table or json")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long")
	fs.IntVar(&g.retries, "retries", g.retries, "retries of a call the cluster could not answer")
	fs.StringVar(&g.ca, "ca", g.ca, "PEM CA of the nodes' certificates")
	fs.StringVar(&g.cert, "cert", g.cert, "PEM client certificate")
	fs.StringVar(&g.key, "key", g.key, "PEM client key")
	fs.StringVar(&g.apiKey, "api-key", g.apiKey, "API key")
}

// cli is one invocation.
type cli struct {
	globals
	stdin          io.Reader
	stdout, stderr io.Writer
}

// flags returns a flag set for command name that also takes the global
// flags.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("intentctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	return fs
}

// parse parses args, flags and positional arguments in any order
// (everything after "--" is positional), and checks the number of
// positional arguments.
func (c *cli) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usagef("see 'intentctl help'")
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	pos = append(pos, tail...)
	if len(pos) != len(positional) {
		if len(positional) == 0 {
			return nil, usagef("%s takes no arguments, got %q", fs.Name(), pos)
		}
		return nil, usagef("%s needs %s", fs.Name(), strings.Join(positional, " "))
	}
	if c.output != "table" && c.output != "json" {
		return nil, usagef("--output must be table or json, not %q", c.output)
	}
	return pos, nil
}

// client returns a client for --addr.
func (c *cli) client() (*client.Client, error) {
	return c.clientTimeout(0)
}

// clientTimeout returns a client for --addr whose HTTP requests may take
// up to httpTimeout (0: the client package's default), for long polls.
func (c *cli) clientTimeout(httpTimeout time.Duration) (*client.Client, error) {
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	if httpTimeout > 0 {
		if hc == nil {
			hc = &http.Client{}
		}
		hc.Timeout = httpTimeout
	}
	opts := []client.Option{client.WithRetries(c.retries), client.WithHTTPClient(hc)}
	if c.apiKey != "" {
		opts = append(opts, client.WithAPIKey(c.apiKey))
	}
	cl, err := client.New(strings.Split(c.addr, ","), opts...)
	if err != nil {
		return nil, usagef("--addr: %v", err)
	}
	return cl, nil
}

// connect returns the client and ctx bounded by --timeout; call cancel
// when the command is done.
func (c *cli) connect(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	cl, err := c.client()
	if err != nil {
		return nil, ctx, func() {}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	return cl, ctx, cancel, nil
}

// call runs fn, one call of the client for the flags, within --timeout:
// what most commands do between parsing and printing.
func call[T any](ctx context.Context, c *cli, fn func(context.Context, *client.Client) (T, error)) (T, error) {
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	defer cancel()
	return fn(ctx, cl)
}

// withTimeout bounds ctx by --timeout.
func (c *cli) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// httpClient is the HTTP client for --ca, --cert and --key (nil: the
// client package's default).
func (c *cli) httpClient() (*http.Client, error) {
	if c.ca == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	conf, err := tlsutil.ClientConfig(c.ca, c.cert, c.key)
	if err != nil {
		return nil, usagef("%v", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = conf
	return &http.Client{Transport: tr, Timeout: client.DefaultHTTPTimeout}, nil
}
