package client

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	c, err := New([]string{"h:1"}, WithBackoff(100*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		jitter     float64
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{
		{0, 0, 0, 50 * time.Millisecond},
		{1, 0, 0, 100 * time.Millisecond},
		{1, 1, 0, 200 * time.Millisecond},
		{1, 3, 0, 800 * time.Millisecond},
		{1, 4, 0, time.Second},
		{1, 60, 0, time.Second},
		{0, 0, 300 * time.Millisecond, 300 * time.Millisecond},
		{0, 0, time.Minute, time.Second},
	} {
		c.jitterFloat = func() float64 { return tc.jitter }
		if got := c.backoff(tc.attempt, tc.retryAfter); got != tc.want {
			t.Errorf("backoff(attempt %d, jitter %v, retry-after %v) = %v, want %v", tc.attempt, tc.jitter, tc.retryAfter, got, tc.want)
		}
	}
}
