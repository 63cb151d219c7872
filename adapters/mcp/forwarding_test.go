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
	"github.com/countersign/countersign/kv"
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
				t.Fatalf("mark = %v, %v, want true, no error", ok, err)
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
		t.Fatalf("mark = %v, %v, want true, no error", ok, err)
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

// runsAt is a fake of the run claims (bot.Runs' Alive): the runs alive.
type runsAt struct {
	mu    sync.Mutex
	alive map[string]bool
}

func (r *runsAt) Alive(_ context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alive[id], nil
}

func (r *runsAt) kill(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.alive, id)
}

// reports is a ReportFunc that drops the marker in a transaction of the
// store and counts the reports by request.
type reports struct {
	store kv.Store
	mu    sync.Mutex
	got   map[string]int
}

func (r *reports) report(ctx context.Context, _ *bot.Caller, id, _, _ string, drop func(kv.Tx) error) error {
	if err := r.store.Update(ctx, drop); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[id]++
	return nil
}

// TestForwardingMarkersBelongToTheirRun plays replicas on one store: a
// marker of a run that is alive is running (another replica is not let
// take it over) and is never reported, neither by a start nor by a
// sweep; once its run dies it is stopped, reported once even by two
// recoveries at once, and may be taken over by a call of a request that
// has not run. A marker an older binary wrote (naming no run) is reported
// only once no call can still be forwarding under it.
func TestForwardingMarkersBelongToTheirRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	a := forwardingWaiter(t, &now)
	runs := &runsAt{alive: map[string]bool{"run_a": true, "run_b": true}}
	b := &waiter{store: a.store, now: a.now, run: func() string { return "run_b" }, alive: runs.Alive}
	a.run, a.alive = func() string { return "run_a" }, runs.Alive
	ctx := context.Background()
	rep := &reports{store: a.store, got: map[string]int{}}
	recoverAs := func(self string) int {
		t.Helper()
		n, err := RecoverForwarding(ctx, a.store, Recovery{Self: self, Alive: runs.Alive, StaleAfter: a.staleAfter(), Now: a.now}, rep.report)
		if err != nil {
			t.Fatalf("RecoverForwarding: %v", err)
		}
		return n
	}

	if ok, err := a.mark(ctx, nil, "req_1", "fs__write_file"); err != nil || !ok {
		t.Fatalf("mark on run a = %v, %v, want true, no error", ok, err)
	}
	if found, live := b.forwarding(ctx, "req_1"); !found || !live {
		t.Fatalf("run b sees run a's marker as found %v, live %v; want found and live", found, live)
	}
	if ok, _ := b.mark(ctx, nil, "req_1", "fs__write_file"); ok {
		t.Fatal("run b took over the marker of a call run a is forwarding")
	}
	if _, running, _ := b.claimReplay(ctx, "req_1"); !running {
		t.Fatal("run b does not report run a's call as running")
	}
	for _, self := range []string{"", "run_b", "run_a"} { // a replica starting, b's sweep, a's sweep
		if n := recoverAs(self); n != 0 {
			t.Fatalf("recovery as %q reported %d markers of a live run, want 0", self, n)
		}
	}

	runs.kill("run_a")
	if found, live := b.forwarding(ctx, "req_1"); !found || live {
		t.Fatalf("after run a died: found %v, live %v; want found, not live", found, live)
	}
	var wg sync.WaitGroup
	var total int
	var mu sync.Mutex
	for range 2 { // two replicas starting at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := recoverAs("")
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != 1 || rep.got["req_1"] != 1 {
		t.Fatalf("two recoveries after run a died reported %d (req_1: %d), want it once", total, rep.got["req_1"])
	}
	if found, _ := b.forwarding(ctx, "req_1"); found {
		t.Fatal("the reported marker is still there")
	}

	// A dead run's marker of a request that never reached the upstream
	// may be taken over by a live run (the receipt is redeemed once).
	a.run = func() string { return "run_c" } // a's replacement: a new run
	runs.alive["run_c"] = true
	if ok, err := a.mark(ctx, nil, "req_2", "fs__write_file"); err != nil || !ok {
		t.Fatalf("mark req_2 = %v, %v, want true, no error", ok, err)
	}
	runs.kill("run_c")
	if ok, err := b.mark(ctx, nil, "req_2", "fs__write_file"); err != nil || !ok {
		t.Fatalf("run b taking over a dead run's marker = %v, %v, want owned", ok, err)
	}
	if n := recoverAs(""); n != 0 {
		t.Fatalf("run b's marker, taken over, was reported %d times, want 0", n)
	}

	// An older binary's marker names no run.
	legacy := &waiter{store: a.store, now: a.now}
	if ok, err := legacy.mark(ctx, nil, "req_3", "fs__write_file"); err != nil || !ok {
		t.Fatalf("legacy mark = %v, %v, want true, no error", ok, err)
	}
	if n := recoverAs(""); n != 0 {
		t.Fatalf("a fresh marker naming no run was reported (%d), want 0: its call may still be forwarding", n)
	}
	now = now.Add(a.staleAfter())
	if n := recoverAs(""); n != 1 || rep.got["req_3"] != 1 {
		// req_2 is run b's, which is alive: left to its run.
		t.Fatalf("after staleAfter: reported %d (req_3: %d), want the old marker naming no run reported", n, rep.got["req_3"])
	}
}

// TestOneProcessRecoversEveryPastRun: without run claims (bbolt, one
// process owns the file) a start reports every marker, and a sweep of
// the serving run reports the markers of past runs but never its own.
func TestOneProcessRecoversEveryPastRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	past := forwardingWaiter(t, &now)
	past.run = func() string { return "local-1" }
	cur := &waiter{store: past.store, now: past.now, run: func() string { return "local-2" }}
	ctx := context.Background()
	for _, m := range []struct {
		w  *waiter
		id string
	}{{past, "req_past"}, {cur, "req_cur"}} {
		if ok, err := m.w.mark(ctx, nil, m.id, "fs__write_file"); err != nil || !ok {
			t.Fatalf("mark %s = %v, %v, want true, no error", m.id, ok, err)
		}
	}
	if found, live := cur.forwarding(ctx, "req_past"); !found || live {
		t.Fatalf("a past run's marker: found %v, live %v; want found, not live", found, live)
	}
	rep := &reports{store: past.store, got: map[string]int{}}
	n, err := RecoverForwarding(ctx, past.store, Recovery{Self: "local-2"}, rep.report)
	if err != nil || n != 1 || rep.got["req_past"] != 1 {
		t.Fatalf("the serving run's sweep: %d, %v, %v; want the past run's marker only", n, err, rep.got)
	}
	n, err = RecoverForwarding(ctx, past.store, Recovery{}, rep.report)
	if err != nil || n != 1 || rep.got["req_cur"] != 1 {
		t.Fatalf("the next start: %d, %v, %v; want the last run's marker", n, err, rep.got)
	}
}
