package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestReplicasHoldAGrantBudget: two serve processes on one PostgreSQL
// database, a refund grant with a budget of 500 a day, and 20 concurrent
// refunds of 60 sent to both replicas at once. The budget is checked and
// counted in each confirming transaction, on the grant's record: exactly
// 8 are approved under the grant (480), never more than the cap; the
// rest wait for a person.
func TestReplicasHoldAGrantBudget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two servers")
	}
	dsn := testDSN(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nhttp:\n  rate_burst: 500\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + `
limits:
  open_items_per_requester: 100
tools:
  - name: refund
    category: mutating
    schema:
      type: object
      required: [customer, amount]
      properties: {customer: {type: string}, amount: {type: number}}
    grants:
      max: 8h
      allow: [duration]
      budget:
        sum: {argument: amount, max: 500, per: 24h}
`
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	agent := e.CreateKey("billing-bot", "agent")
	alice := e.CreateKey("alice", "member")
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}
	reps := []*replica{startReplica(t, cfg, env), startReplica(t, cfg, env)}
	refund := func(amount float64) map[string]any {
		return map[string]any{"user_id": "shop", "tool": "refund", "arguments": map[string]any{"customer": "c1", "amount": amount}}
	}
	st, m, err := reps[0].call(agent, "confirm_action", refund(100))
	if err != nil || st != 200 {
		t.Fatalf("confirm_action: %d %v %v, want 200 and no error", st, m, err)
	}
	if st, m, err := reps[0].call(alice, "approve_action", map[string]any{"request_id": data(m)["request_id"],
		"grant": map[string]any{"kind": "duration", "for": "1h", "match": map[string]any{"customer": "c1"}}}); err != nil || st != 200 {
		t.Fatalf("approve with a grant: %d %v %v, want 200 and no error", st, m, err)
	}

	const calls = 20
	var wg sync.WaitGroup
	results := make([]map[string]any, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, m, err := reps[i%2].call(agent, "confirm_action", refund(60))
			if err == nil && st != 200 {
				err = fmt.Errorf("status %d: %v", st, m)
			}
			results[i], errs[i] = data(m), err
		}()
	}
	wg.Wait()
	granted, pending := 0, 0
	for i, d := range results {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		switch {
		case d["status"] == "approved" && d["grant_id"] == float64(1):
			granted++
		case d["status"] == "pending":
			pending++
		default:
			t.Fatalf("call %d: %v, want approved by grant 1 or pending", i, d)
		}
	}
	if granted != 8 || pending != calls-8 {
		t.Fatalf("under a budget of 500: %d refunds of 60 approved by the grant (%v), %d pending; want 8 (480) and %d", granted, float64(granted)*60, pending, calls-8)
	}
	// What is left is on the grant, on either replica.
	_, m, err = reps[1].call(alice, "list_grants", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(data(m)["grants"]); !strings.Contains(got, "uses:8") {
		t.Fatalf("list_grants after the burst: %s, want it to contain %q", got, "uses:8")
	}
}
