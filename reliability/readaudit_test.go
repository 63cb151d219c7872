package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

const readAuditConfig = `http:
  rate_per_minute: 100000000
  rate_burst: 10000000
log:
  level: info
`

// TestCleanStopRecordsEveryReadVerdict stops the real binary with SIGTERM
// while clients are asking check_before_act (audited through the queue):
// every verdict that was answered is in the chain, which verifies; the
// running marker is cleared, so the next start records no unclean_restart.
func TestCleanStopRecordsEveryReadVerdict(t *testing.T) {
	t.Parallel()
	c := newChild(t, readAuditConfig)
	agent := c.key("agent", "agent")
	c.start()
	c.mustCall(agent, "remember", map[string]any{"subject": "allergy", "value": "penicillin"})
	var (
		mu       sync.Mutex
		answered []string
		n        atomic.Int64
	)
	reached := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				subject := fmt.Sprintf("s%d_%d", w, i)
				a, err := c.call(ctx, agent, "check_before_act", map[string]any{"subject": subject})
				if err != nil {
					return // the server stopped
				}
				if a.Status == 200 {
					mu.Lock()
					answered = append(answered, subject)
					mu.Unlock()
					if n.Add(1) == 300 {
						once.Do(func() { close(reached) })
					}
				}
			}
		}()
	}
	// Let the queue work, then stop while calls are in flight.
	select {
	case <-reached:
	case err := <-c.done:
		c.done <- err
		t.Fatalf("the server exited: %v\n%s", err, c.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d verdicts in a minute, want 300\n%s", n.Load(), c.logs())
	}
	if err := c.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, c.logs())
	}
	cancel()
	wg.Wait()
	c.checkStore(func(db *bolt.DB) {
		recorded := map[string]bool{}
		forEachEntry(t, db, func(e approvals.Entry) {
			if e.Action == "check_before_act" {
				recorded[strings.TrimSuffix(strings.TrimSuffix(e.Detail, ": SAFE"), ": BLOCKED")] = true
			}
			if e.Action == "unclean_restart" {
				t.Errorf("unclean_restart after a first clean run: %+v, want none", e)
			}
		})
		for _, s := range answered {
			if !recorded[s] {
				t.Errorf("the verdict on %q was answered but is not in the audit chain", s)
			}
		}
		var marker []byte
		_ = db.View(context.Background(), func(tx kv.Tx) error { marker, _ = tx.Get("run", []byte("running")); return nil })
		if marker != nil {
			t.Errorf("the running marker survived a clean stop: %s, want none", marker)
		}
	})
	t.Logf("%d verdicts answered, all recorded", len(answered))
	// A clean stop is not reported at the next start.
	c.start()
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	c.checkStore(func(db *bolt.DB) {
		forEachEntry(t, db, func(e approvals.Entry) {
			if e.Action == "unclean_restart" {
				t.Errorf("unclean_restart after clean stops: %+v, want none", e)
			}
		})
	})
}

func forEachEntry(t *testing.T, db *bolt.DB, fn func(approvals.Entry)) {
	t.Helper()
	err := db.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			e, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			fn(e)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
