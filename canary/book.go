package canary

import (
	"fmt"
	"sort"
	"sync"
)

// The headers that carry an episode's identity from the agent through the
// proxy to the tool and on to the provider, like a trace context. The tool
// call's own arguments travel in the body.
const (
	// HeaderEpisode names the episode: "<seed>/<class>/<episode>".
	HeaderEpisode = "Canary-Episode"
	// HeaderDelivery names one delivery of the call: "a0", "a1",
	// "a0.dup1" ...
	HeaderDelivery = "Canary-Delivery"
	// HeaderCrash, set by the proxy on a delivery the plan crashes, tells
	// the tool where to die: "before" or "after" the effect.
	HeaderCrash = "Canary-Crash"
)

// effect is one real side effect in the ground-truth log.
type effect struct {
	delivery string
	amount   int
}

// episodeRecord is what the proxy, the provider and the agent learn about
// one episode.
type episodeRecord struct {
	mu sync.Mutex
	// events is the order things happened in, as observed (for the bug
	// report only: it depends on scheduling).
	events []string
	// planned is one line per delivery the proxy handled, with the faults
	// it applied; sorted before use.
	planned []string
	// outcomes are the tool's answers to every delivery it got, whether or
	// not the agent saw them.
	outcomes []string
	// effects is the ground truth: every real effect of the episode.
	effects []effect
	// stats counted by the proxy.
	deliveries, acksLost, crashes int
	// bg tracks deliveries the agent no longer waits for (held or
	// duplicated copies).
	bg sync.WaitGroup
}

func (e *episodeRecord) add(format string, args ...any) {
	e.mu.Lock()
	e.events = append(e.events, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

func (e *episodeRecord) eventList() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// hasEffect reports whether the provider performed an effect of the
// delivery.
func (e *episodeRecord) hasEffect(delivery string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.effects {
		if f.delivery == delivery {
			return true
		}
	}
	return false
}

// book holds the records of a run's episodes by label.
type book struct {
	mu  sync.Mutex
	eps map[string]*episodeRecord
}

func newBook() *book { return &book{eps: map[string]*episodeRecord{}} }

// get returns the record of label, making it on first use.
func (b *book) get(label string) *episodeRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.eps[label]
	if !ok {
		e = &episodeRecord{}
		b.eps[label] = e
	}
	return e
}

// snapshot copies what the checks need, sorted where order depends on
// scheduling.
func (e *episodeRecord) snapshot() (planned, outcomes []string, effects []effect) {
	e.mu.Lock()
	defer e.mu.Unlock()
	planned = append([]string(nil), e.planned...)
	outcomes = append([]string(nil), e.outcomes...)
	effects = append([]effect(nil), e.effects...)
	sort.Strings(planned)
	sort.Strings(outcomes)
	return planned, outcomes, effects
}

// episodeLabel names an episode on the wire and in the ground truth.
func episodeLabel(seed uint64, class Class, n int) string {
	return fmt.Sprintf("%d/%s/%04d", seed, class, n)
}

// parseLabel reads a label back.
func parseLabel(s string) (seed uint64, class Class, n int, err error) {
	var cls string
	if _, err = fmt.Sscanf(s, "%d/%s", &seed, &cls); err != nil {
		return 0, 0, 0, fmt.Errorf("canary: bad episode label %q", s)
	}
	// %s swallowed "class/nnnn".
	for i := len(cls) - 1; i >= 0; i-- {
		if cls[i] == '/' {
			if _, err = fmt.Sscanf(cls[i+1:], "%d", &n); err != nil {
				return 0, 0, 0, fmt.Errorf("canary: bad episode label %q", s)
			}
			class, err = ParseClass(cls[:i])
			return seed, class, n, err
		}
	}
	return 0, 0, 0, fmt.Errorf("canary: bad episode label %q", s)
}
