package actiontools

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// TestGrantBudgetInTheConfirmingCall: a refund grant with a budget of 3
// uses and 500 a day approves calls while both hold, says in the card's
// thread what is left, and leaves the call over the budget to a person
// (audited, noted in the thread); a dose grant held within 10% of the
// approved dose approves 5.5 mg, not 6 mg.
func TestGrantBudgetInTheConfirmingCall(t *testing.T) {
	tools := append(testTools(),
		ToolSpec{Name: "refund", Category: "mutating", Schema: map[string]any{"type": "object", "properties": map[string]any{"customer": map[string]any{"type": "string"}, "amount": map[string]any{"type": "number"}}},
			Grants: GrantPolicy{Max: 8 * time.Hour, Allow: []string{"duration"}, Budget: approvals.GrantBudget{Uses: 3, SumArgument: "amount", SumMax: 500, SumPer: 24 * time.Hour}}},
		ToolSpec{Name: "set_dose", Category: "mutating", Schema: map[string]any{"type": "object", "properties": map[string]any{"drug": map[string]any{"type": "string"}, "dose_mg": map[string]any{"type": "number"}}},
			Grants: GrantPolicy{Max: 8 * time.Hour, Allow: []string{"duration"}, Budget: approvals.GrantBudget{WithinArgument: "dose_mg", WithinPercent: 10}}},
	)
	e := newEnv(t, Options{Tools: tools})
	agent := e.principal("billing-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	call := func(tool string, args map[string]any) map[string]any {
		d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": tool, "arguments": args, "user_id": "shop"})
		return d
	}
	grant := func(tool string, args map[string]any, match map[string]any) {
		d := call(tool, args)
		e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"], "grant": map[string]any{"kind": "duration", "for": "1h", "match": match}})
	}

	grant("refund", map[string]any{"customer": "c1", "amount": 50}, map[string]any{"customer": "c1"})
	for i, amount := range []float64{200, 250} {
		if d := call("refund", map[string]any{"customer": "c1", "amount": amount}); d["status"] != "approved" {
			t.Fatalf("refund %d of %v under the budget: status %v, want approved", i, amount, d["status"])
		}
	}
	notes := e.events("slack", bot.EventNote)
	if last := notes[len(notes)-1].Note; !strings.Contains(last, "Budget: 1 of 3 uses left over the grant's life; 50 of 500 amount left in any 24h.") {
		t.Fatalf("the thread note of a use: %q, want it to contain %q", last, "Budget: 1 of 3 uses left over the grant's life; 50 of 500 amount left in any 24h.")
	}
	if d := call("refund", map[string]any{"customer": "c1", "amount": 60}); d["status"] != "pending" {
		t.Fatalf("a refund over the sum: status %v, want pending", d["status"])
	}
	if a := e.audits("grant_budget_spent"); len(a) != 1 || !strings.Contains(a[0].Detail, "amount 60 would bring grant #1's amount to 510, over its budget of 500 in any 24h") {
		t.Fatalf("the refused use audited as %+v, want one entry naming %q", a, "amount 60 would bring grant #1's amount to 510, over its budget of 500 in any 24h")
	}
	if d := call("refund", map[string]any{"customer": "c1", "amount": 50}); d["status"] != "approved" {
		t.Fatalf("the third use, at the cap: status %v, want approved", d["status"])
	}
	if d := call("refund", map[string]any{"customer": "c1", "amount": 0}); d["status"] != "pending" {
		t.Fatalf("a fourth use: status %v, want pending", d["status"])
	}

	grant("set_dose", map[string]any{"drug": "apixaban", "dose_mg": 5}, map[string]any{"drug": "apixaban"})
	if d := call("set_dose", map[string]any{"drug": "apixaban", "dose_mg": 5.5}); d["status"] != "approved" {
		t.Fatalf("5.5 mg under a 5 mg grant within 10%%: status %v, want approved", d["status"])
	}
	if d := call("set_dose", map[string]any{"drug": "apixaban", "dose_mg": 6}); d["status"] != "pending" {
		t.Fatalf("6 mg under a 5 mg grant within 10%%: status %v, want pending", d["status"])
	}
}
