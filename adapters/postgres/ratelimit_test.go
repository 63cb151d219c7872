package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRateLimitsAreSharedByReplicas: two stores on one database take from
// the same buckets. 60 takes at once, half through each, at one instant,
// from a bucket of 10: exactly 10 are allowed, and each refused one says
// when the next token comes. Refills follow the clock passed in: one
// interval later exactly one more, and a bucket left alone long enough is
// full again and pruned. Another key and another limiter name have buckets
// of their own.
func TestRateLimitsAreSharedByReplicas(t *testing.T) {
	dsn := openDSN(t)
	ctx := context.Background()
	var stores []*RateLimits
	for range 2 {
		db, err := Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		stores = append(stores, db.RateLimits())
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const perSec, burst = 1.0, 10 // one a second, bursts of 10
	var allowed atomic.Int32
	var worstWait atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, wait, err := stores[i%2].Take(ctx, "calls", "prin_agent", perSec, burst, t0)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				allowed.Add(1)
			} else if int64(wait) > worstWait.Load() {
				worstWait.Store(int64(wait))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := allowed.Load(); got != burst {
		t.Fatalf("60 takes from a bucket of %d through two replicas: %d allowed, want %d", burst, got, burst)
	}
	if got := time.Duration(worstWait.Load()); got != time.Second {
		t.Fatalf("a refused take waits %v, want 1s (the next token)", got)
	}
	take := func(s *RateLimits, name, key string, at time.Time) bool {
		t.Helper()
		ok, _, err := s.Take(ctx, name, key, perSec, burst, at)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !take(stores[0], "calls", "prin_other", t0) || !take(stores[1], "mcp_protocol", "prin_agent", t0) {
		t.Fatal("another key or another limiter shares the empty bucket")
	}
	at := t0.Add(time.Second)
	if !take(stores[1], "calls", "prin_agent", at) || take(stores[0], "calls", "prin_agent", at) {
		t.Fatal("one interval later: want exactly one more take allowed")
	}
	n, err := stores[0].Prune(ctx, t0.Add(5*time.Second))
	if err != nil || n != 2 {
		// prin_other and mcp_protocol are full again; prin_agent is not.
		t.Fatalf("prune 5s later: %d, %v; want the 2 buckets that are full again", n, err)
	}
	if ok, _, _ := stores[1].Take(ctx, "calls", "prin_agent", perSec, burst, t0.Add(5*time.Second)); !ok {
		t.Fatal("5s later: a token had refilled, the take was refused")
	}
}
