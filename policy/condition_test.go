package policy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// medSchema is order_medication's argument schema in the tests.
var medSchema = map[string]any{"type": "object", "required": []any{"drug", "dose_mg"}, "properties": map[string]any{
	"drug":    map[string]any{"type": "string"},
	"dose_mg": map[string]any{"type": "number"},
	"refills": map[string]any{"type": "integer"},
	"route":   map[string]any{"type": "object", "properties": map[string]any{"kind": map[string]any{"type": "string"}}},
}}

// TestConditionsCompileAtStart: a condition that does not parse or
// type-check (a misspelt argument, a comparison of a string with a
// number, a non-bool result) is refused with CEL's position in it.
func TestConditionsCompileAtStart(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"args.dose_mgg > 10", "at line 1, column 5: undefined field 'dose_mgg'"},
		{"args.drug > 10", "no matching overload"},
		{"args.dose_mg", "is of type double, not bool"},
		{"args.dose_mg > ", "Syntax error"},
		{"nobody == 1", "undeclared reference to 'nobody'"},
		{"args.route.kinds == 'iv'", "undefined field 'kinds'"},
		{"", "empty"},
		{strings.Repeat("a", MaxConditionBytes+1), "at most"},
	} {
		_, err := CompileCondition(tc.expr, medSchema)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CompileCondition(%.40q): err %v, want one containing %q", tc.expr, err, tc.want)
		}
	}
}

// TestConditionTable is rules against requests: for each call, whether
// the condition matched and the reason a card shows, or the run-time
// error it fails closed on.
func TestConditionTable(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	in := func(args map[string]any) ConditionInput {
		return ConditionInput{Tool: "order_medication", Args: args,
			Requester: ConditionRequester{Name: "ward_bot", Role: "agent", Kind: "agent", Scopes: []string{"patient_42"}, Groups: []string{"night_agents"}},
			Space:     Space{UserID: "patient_42", AgentID: "ward"}, Facts: map[string][]string{"allergy": {"penicillin"}}, Now: now}
	}
	for _, tc := range []struct {
		name, expr string
		args       map[string]any
		match      bool
		why, err   string
	}{
		{"above the threshold", "args.dose_mg > 10", map[string]any{"drug": "x", "dose_mg": 50.0}, true, "dose_mg 50 > 10", ""},
		{"below the threshold", "args.dose_mg > 10", map[string]any{"drug": "x", "dose_mg": 5.0}, false, "", ""},
		{"integer typed from the schema", "args.refills >= 2", map[string]any{"refills": 3.0}, true, "refills 3 >= 2", ""},
		{"two comparisons", "args.dose_mg > 10 && args.drug == 'warfarin'", map[string]any{"drug": "warfarin", "dose_mg": 12.5}, true, `dose_mg 12.5 > 10, drug "warfarin" == "warfarin"`, ""},
		{"only the comparison that held", "args.dose_mg > 100 || args.drug == 'warfarin'", map[string]any{"drug": "warfarin", "dose_mg": 1.0}, true, `drug "warfarin" == "warfarin"`, ""},
		{"a fact", "'penicillin' in facts.allergy", map[string]any{}, true, `"penicillin" in facts.allergy [penicillin]`, ""},
		{"a fact not recorded reads empty", "size(facts.active_medication) == 0", map[string]any{}, true, "size(…) 0 == 0", ""},
		{"requester and space", "requester.kind == 'agent' && space.user_id in requester.scopes", map[string]any{}, true, `requester.kind "agent" == "agent", space.user_id "patient_42" in requester.scopes [patient_42]`, ""},
		{"the requester's groups", "'night_agents' in requester.groups && !('interns' in requester.groups)", map[string]any{}, true, `"night_agents" in requester.groups [night_agents]`, ""},
		{"the tool", "tool == 'order_medication'", map[string]any{}, true, `tool "order_medication" == "order_medication"`, ""},
		{"the time", "now >= timestamp('2026-12-01T00:00:00Z')", map[string]any{}, true, "now 2026-12-02T09:00:00Z >= timestamp(…) 2026-12-01T00:00:00Z", ""},
		{"no comparison: the expression", "has(args.refills)", map[string]any{"refills": 1.0}, true, "has(args.refills)", ""},
		{"a missing argument errors", "args.refills > 1", map[string]any{}, false, "", "no such key: refills"},
		{"has() guards it", "has(args.refills) && args.refills > 1", map[string]any{}, false, "", ""},
		{"a nested object", "args.route.kind == 'iv'", map[string]any{"route": map[string]any{"kind": "iv"}}, true, `route.kind "iv" == "iv"`, ""},
		{"a false condition", "args.dose_mg > 10 && args.drug == 'warfarin'", map[string]any{"drug": "x", "dose_mg": 50.0}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CompileCondition(tc.expr, medSchema)
			if err != nil {
				t.Fatalf("compile %q: %v", tc.expr, err)
			}
			got, why, err := c.Eval(in(tc.args))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Eval: err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got != tc.match || why != tc.why {
				t.Errorf("Eval = %v, %q; want %v, %q", got, why, tc.match, tc.why)
			}
		})
	}
}

// TestConditionCostLimit: an evaluation that would run too long stops
// with an error (the rule then fails closed).
func TestConditionCostLimit(t *testing.T) {
	c, err := CompileCondition("args.xs.all(a, args.xs.all(b, args.xs.all(c, a + b + c >= 0)))", nil)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]any, 100)
	for i := range xs {
		xs[i] = float64(i)
	}
	_, _, err = c.Eval(ConditionInput{Args: map[string]any{"xs": xs}})
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Errorf("Eval over 10^6 steps: err %v, want the cost limit exceeded", err)
	}
	if ok, _, err := c.Eval(ConditionInput{Args: map[string]any{"xs": xs[:5]}}); !ok || err != nil {
		t.Errorf("Eval over 125 steps = %v, %v; want true, nil", ok, err)
	}
}

// TestConditionFacts: the subjects a condition reads are found in it, so
// that the caller reads them in the request's space.
func TestConditionFacts(t *testing.T) {
	c, err := CompileCondition(`'x' in facts.allergy || size(facts["active_medication"]) > 2`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Facts(), ","); got != "active_medication,allergy" {
		t.Errorf("Facts = %s, want active_medication,allergy", got)
	}
}

// TestConditionWithoutSchema: a tool without a schema gives args as a map
// of any values; a missing key is a run-time error.
func TestConditionWithoutSchema(t *testing.T) {
	c, err := CompileCondition(`args.amount > 100`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, why, err := c.Eval(ConditionInput{Args: map[string]any{"amount": 150.0}}); !ok || err != nil || why != "amount 150 > 100" {
		t.Errorf("Eval = %v, %q, %v; want true, \"amount 150 > 100\", nil", ok, why, err)
	}
	if _, _, err := c.Eval(ConditionInput{Args: map[string]any{}}); err == nil {
		t.Error("a missing key evaluated without an error")
	}
}

// FuzzCondition feeds arbitrary arguments to compiled conditions: no
// panic, and every evaluation ends (the cost limit bounds it).
func FuzzCondition(f *testing.F) {
	exprs := []string{
		"args.dose_mg > 10",
		"has(args.refills) && args.refills > 1 || args.drug.startsWith('w')",
		"args.route.kind == 'iv' && 'penicillin' in facts.allergy",
		"size(args.drug) > 3 && args.drug.matches('^[a-z]+$')",
	}
	var conds []*Condition
	for _, e := range exprs {
		c, err := CompileCondition(e, medSchema)
		if err != nil {
			f.Fatalf("%s: %v", e, err)
		}
		conds = append(conds, c)
	}
	f.Add(`{"drug":"warfarin","dose_mg":50}`)
	f.Add(`{"dose_mg":"fifty","refills":1.5}`)
	f.Add(`{"route":{"kind":7},"drug":null}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var args map[string]any
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			return
		}
		for _, c := range conds {
			_, _, _ = c.Eval(ConditionInput{Args: args, Facts: map[string][]string{"allergy": {raw}}})
		}
	})
}
