package approvals

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestGrantBudget: a grant's uses are counted per window, the sum of a
// numeric argument is capped, a numeric argument is held within a range
// of the approved value, and a refused use records nothing.
func TestGrantBudget(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	args := func(amount float64) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"customer": "c1", "amount": amount})
		return b
	}

	g := &Grant{ID: 4}
	uses := GrantBudget{Uses: 2, Per: time.Hour}
	for i, tc := range []struct {
		at      time.Duration
		why     string
		left    string
		spentTo int
	}{
		{0, "", "1 of 2 uses left in any 1h", 1},
		{time.Minute, "", "0 of 2 uses left in any 1h", 2},
		{2 * time.Minute, "grant #4 has approved its 2 calls in any 1h", "", 2},
		{60*time.Minute + 30*time.Second, "", "0 of 2 uses left in any 1h", 2}, // the first use left the window
	} {
		why, left := g.Spend(uses, args(1), t0.Add(tc.at))
		if why != tc.why || left != tc.left || len(g.Spent) != tc.spentTo {
			t.Errorf("use %d: why %q left %q spent %d; want %q %q %d", i, why, left, len(g.Spent), tc.why, tc.left, tc.spentTo)
		}
	}
	if g.Uses != 3 {
		t.Errorf("Uses = %d, want 3 (the refused use is not counted)", g.Uses)
	}

	g = &Grant{ID: 5}
	sum := GrantBudget{SumArgument: "amount", SumMax: 500, SumPer: 24 * time.Hour}
	if why, left := g.Spend(sum, args(300), t0); why != "" || left != "200 of 500 amount left in any 24h" {
		t.Fatalf("300 of 500: %q %q, want no refusal and %q", why, left, "200 of 500 amount left in any 24h")
	}
	if why, _ := g.Spend(sum, args(250), t0.Add(time.Hour)); !strings.Contains(why, "amount 250 would bring grant #5's amount to 550, over its budget of 500 in any 24h") {
		t.Fatalf("250 more: %q, want it to contain %q", why, "amount 250 would bring grant #5's amount to 550, over its budget of 500 in any 24h")
	}
	if why, left := g.Spend(sum, args(200), t0.Add(time.Hour)); why != "" || left != "0 of 500 amount left in any 24h" {
		t.Fatalf("200 more: %q %q, want no refusal and %q", why, left, "0 of 500 amount left in any 24h")
	}
	if why, _ := g.Spend(sum, json.RawMessage(`{"amount":"lots"}`), t0.Add(2*time.Hour)); why == "" {
		t.Fatal("a non-numeric amount was spent")
	}
	if why, _ := g.Spend(sum, args(100), t0.Add(25*time.Hour)); why != "" {
		t.Fatalf("a day later: %q, want no refusal", why)
	}

	g = &Grant{ID: 6, Base: map[string]float64{"amount": 100}}
	within := GrantBudget{WithinArgument: "amount", WithinPercent: 10}
	for _, tc := range []struct {
		v  float64
		ok bool
	}{{110, true}, {90, true}, {110.5, false}, {50, false}} {
		if why, _ := g.Spend(within, args(tc.v), t0); (why == "") != tc.ok {
			t.Errorf("within 10%% of 100: %v gives refusal %q, want allowed = %v", tc.v, why, tc.ok)
		}
	}
}
