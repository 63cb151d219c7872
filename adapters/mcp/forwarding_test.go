package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
)

// forwardingWaiter is a waiter on a real bbolt file, its clock at *now.
func forwardingWaiter(t *testing.T, now *time.Time) *waiter {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "cs.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &waiter{store: db, now: func() time.Time { return *now }}
}

// TestForwardingMarkerHasOneOwner: of calls that try to forward the same
// request at once, exactly one holds the marker; once it finishes, the
// marker is gone and its answer kept.
func TestForwardingMarkerHasOneOwner(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	w := forwardingWaiter(t, &now)
	ctx := context.Background()
	caller := &bot.Caller{Principal: bot.Principal{ID: "prin_a", Name: "ward_bot", Kind: "agent"}}
	var wg sync.WaitGroup
	owned := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := w.mark(ctx, caller, "req_1", "fs__write_file")
			if err != nil {
				t.Errorf("mark: %v", err)
			}
			owned <- ok
		}()
	}
	wg.Wait()
	close(owned)
	n := 0
	for ok := range owned {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d of 8 calls hold the marker of one request, want exactly 1", n)
	}
	if found, live := w.forwarding(ctx, "req_1"); !found || !live {
		t.Fatalf("forwarding = %v, %v while the marker is held, want found and live", found, live)
	}
	if replay, running, err := w.claimReplay(ctx, "req_1"); err != nil || replay || !running {
		t.Fatalf("claimReplay while forwarding = %v, %v, %v; want running, no replay", replay, running, err)
	}
	if err := w.finish(ctx, "req_1", json.RawMessage(`{"content":[]}`)); err != nil {
		t.Fatal(err)
	}
	if found, _ := w.forwarding(ctx, "req_1"); found {
		t.Fatal("the marker outlived finish")
	}
	if raw, at := w.recordedResult(ctx, "req_1"); string(raw) != `{"content":[]}` || !at.Equal(now) {
		t.Fatalf("recorded answer %s at %v, want the finished one at %v", raw, at, now)
	}
}

// TestReplayIsClaimedOnceWithinTheWindow: the recorded answer of a run is
// given to one identical call, once, within retryWindow of the run; not
// to a second one, nor after the window, nor for a run with no answer.
func TestReplayIsClaimedOnceWithinTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ran := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		answer  json.RawMessage // nil: the upstream failed, nothing kept
		after   time.Duration
		want    []bool // one claim after another
		running bool
	}{
		{"at once: the first identical call only", json.RawMessage(`{"content":[]}`), time.Second, []bool{true, false, false}, false},
		{"just inside the window", json.RawMessage(`{"content":[]}`), retryWindow - time.Second, []bool{true, false}, false},
		{"after the window: a new call", json.RawMessage(`{"content":[]}`), retryWindow, []bool{false}, false},
		{"no answer kept", nil, time.Second, []bool{false}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := ran
			w := forwardingWaiter(t, &now)
			if ok, err := w.mark(ctx, nil, "req_1", "fs__write_file"); err != nil || !ok {
				t.Fatalf("mark = %v, %v", ok, err)
			}
			if err := w.finish(ctx, "req_1", tc.answer); err != nil {
				t.Fatal(err)
			}
			now = ran.Add(tc.after)
			for i, want := range tc.want {
				replay, running, err := w.claimReplay(ctx, "req_1")
				if err != nil || replay != want || running != tc.running {
					t.Fatalf("claim %d = replay %v, running %v, %v; want replay %v, running %v", i+1, replay, running, err, want, tc.running)
				}
			}
		})
	}
}

// TestStaleForwardingMarkerIsTakenOver: a marker older than the call
// timeout and a minute is a call that stopped (a replica that died): it is
// no longer reported as running, and a call of a request that has not run
// may take it over (the receipt, redeemed once, keeps that to one run).
func TestStaleForwardingMarkerIsTakenOver(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	w := forwardingWaiter(t, &now)
	ctx := context.Background()
	if ok, err := w.mark(ctx, nil, "req_1", "fs__write_file"); err != nil || !ok {
		t.Fatalf("mark = %v, %v", ok, err)
	}
	now = now.Add(w.staleAfter() - time.Second)
	if ok, _ := w.mark(ctx, nil, "req_1", "fs__write_file"); ok {
		t.Fatal("a live marker was taken over")
	}
	now = now.Add(time.Second)
	if found, live := w.forwarding(ctx, "req_1"); !found || live {
		t.Fatalf("forwarding = %v, %v for a stale marker, want found, not live", found, live)
	}
	if _, running, _ := w.claimReplay(ctx, "req_1"); running {
		t.Fatal("a stale marker is reported as running")
	}
	if ok, err := w.mark(ctx, nil, "req_1", "fs__write_file"); err != nil || !ok {
		t.Fatalf("taking over a stale marker = %v, %v, want owned", ok, err)
	}
	if found, live := w.forwarding(ctx, "req_1"); !found || !live {
		t.Fatalf("after the take-over forwarding = %v, %v, want a live marker", found, live)
	}
}
