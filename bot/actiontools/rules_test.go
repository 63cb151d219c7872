package actiontools

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// medSchema is order_medication's schema in these tests.
var medSchema = map[string]any{"type": "object", "required": []any{"drug", "dose_mg"}, "properties": map[string]any{
	"drug": map[string]any{"type": "string"}, "dose_mg": map[string]any{"type": "number"}, "refills": map[string]any{"type": "integer"},
}}

// ruleTools declare order_medication with rules: above 10 mg a prescriber
// then a pharmacist (step-up at the pharmacist stage); amoxicillin for a
// patient allergic to penicillin needs two named doctors; a microdose is
// read-only; refills above 3 (an argument a call may leave out, so the
// rule tests has() first) take the head pharmacist, and so do lots above
// 100 (a rule that fails at run time when the lot is not a number). No
// rule: any member.
func ruleTools() []ToolSpec {
	return append(testTools(), ToolSpec{Name: "order_medication", Category: "mutating", Schema: medSchema, Timeout: 30 * time.Minute,
		Rules: []RuleSpec{
			{When: "args.dose_mg > 10", Stages: []StageSpec{
				{Name: "prescriber", Approvers: approvals.Approvers{Roles: []string{"member"}}},
				{Name: "pharmacist", Approvers: approvals.Approvers{Groups: []string{"pharmacists"}}, StepUp: true},
			}},
			{When: "'penicillin' in facts.allergy && args.drug == 'amoxicillin'", Quorum: 2, Approvers: &approvals.Approvers{Principals: []string{"dr_a", "dr_b"}}},
			{When: "args.dose_mg < 1", Category: "read-only"},
			{When: "has(args.refills) && args.refills > 3", Approvers: &approvals.Approvers{Principals: []string{"head_ph"}}},
			{When: "args.drug.startsWith('lot:') && int(args.drug.substring(4)) > 100", Approvers: &approvals.Approvers{Principals: []string{"head_ph"}}, Timeout: 5 * time.Minute},
		}})
}

func newRulesEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, path: t.TempDir() + "/cs.db", opts: Options{Tools: ruleTools(), StepUp: StepUpSpec{Within: 5 * time.Minute}},
		groups: policy.Groups{"pharmacists": {"ph_lee", "ph_kim"}}}
	base := newEnv(t, Options{Tools: testTools()}) // for its key and clock
	e.key, e.clock = base.key, base.clock
	e.open()
	return e
}

func medCall(args map[string]any) map[string]any {
	return map[string]any{"tool": "order_medication", "arguments": args, "user_id": "patient_42"}
}

// TestRulesTable is rules against requests: for each call, which rule
// matched and why (as the request, action_status and the card say), and
// what it set.
func TestRulesTable(t *testing.T) {
	e := newRulesEnv(t)
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	e.remember("allergy", "penicillin")
	for _, tc := range []struct {
		name      string
		args      map[string]any
		rule      int // 0: none
		why       string
		status    string
		mechanics string
		check     func(t *testing.T, r *approvals.Request)
	}{
		{"above the threshold: two stages", map[string]any{"drug": "apixaban", "dose_mg": 50}, 1, "dose_mg 50 > 10", "pending", "confirm", func(t *testing.T, r *approvals.Request) {
			if len(r.Stages) != 2 || r.Stages[0].Name != "prescriber" || r.Stages[1].StepUp != 5*time.Minute || r.Stages[0].StepUp != 0 {
				t.Errorf("stages %+v, want prescriber then pharmacist with step-up", r.Stages)
			}
		}},
		{"a fact and an argument", map[string]any{"drug": "amoxicillin", "dose_mg": 5}, 2, `"penicillin" in facts.allergy [penicillin], drug "amoxicillin" == "amoxicillin"`, "pending", "confirm", func(t *testing.T, r *approvals.Request) {
			if r.Quorum != 2 || strings.Join(r.Approvers.Principals, ",") != "dr_a,dr_b" {
				t.Errorf("quorum %d approvers %+v, want 2 of dr_a, dr_b", r.Quorum, r.Approvers)
			}
		}},
		{"a microdose is read-only", map[string]any{"drug": "lot:7", "dose_mg": 0.5}, 3, "dose_mg 0.5 < 1", "approved", "auto", nil},
		{"no rule: the tool's policy", map[string]any{"drug": "apixaban", "dose_mg": 5}, 0, "", "pending", "confirm", func(t *testing.T, r *approvals.Request) {
			if r.Rule != nil || len(r.Stages) != 0 || r.Quorum != 1 {
				t.Errorf("rule %+v stages %d quorum %d, want the tool's", r.Rule, len(r.Stages), r.Quorum)
			}
		}},
		{"a rule that errors fails closed", map[string]any{"drug": "lot:x", "dose_mg": 5}, 5, "", "pending", "confirm", func(t *testing.T, r *approvals.Request) {
			if !strings.Contains(r.Rule.Error, "type conversion error") {
				t.Errorf("rule error %q, want the conversion's error", r.Rule.Error)
			}
			if strings.Join(r.Approvers.Principals, ",") != "head_ph" || r.ExpiresAt != r.CreatedAt.Add(5*time.Minute) {
				t.Errorf("approvers %+v expires %s, want the failing rule's", r.Approvers, r.ExpiresAt)
			}
		}},
		{"refills above 3", map[string]any{"drug": "apixaban", "dose_mg": 5, "refills": 4}, 4, "refills 4 > 3", "pending", "confirm", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := e.ok(agent, "confirm_action", medCall(tc.args))
			r := e.request(d["request_id"].(string))
			if tc.rule == 0 {
				if d["rule"] != nil {
					t.Errorf("data.rule = %v, want none", d["rule"])
				}
			} else {
				rule, _ := d["rule"].(map[string]any)
				if r.Rule == nil || r.Rule.Index != tc.rule || rule["index"] != float64(tc.rule) {
					t.Fatalf("rule %+v (data %v), want rule %d", r.Rule, d["rule"], tc.rule)
				}
				if r.Rule.Why != tc.why {
					t.Errorf("why %q, want %q", r.Rule.Why, tc.why)
				}
			}
			if d["status"] != tc.status || d["mechanics"] != tc.mechanics {
				t.Errorf("status %v mechanics %v, want %s %s", d["status"], d["mechanics"], tc.status, tc.mechanics)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			if r.ItemID != 0 && tc.rule != 0 {
				it, err := e.b.Items().Get(t.Context(), r.ItemID)
				if err != nil {
					t.Fatal(err)
				}
				want := "asked by rule " + string(rune('0'+tc.rule))
				if !strings.Contains(it.Asked, want) || (tc.why != "" && !strings.Contains(it.Asked, tc.why)) {
					t.Errorf("card says %q, want %q and %q", it.Asked, want, tc.why)
				}
			}
		})
	}
}

// TestRulesRefusedAtStart: a rule that does not compile or type-check
// stops Register, naming the tool and the rule with CEL's position.
func TestRulesRefusedAtStart(t *testing.T) {
	e := newEnv(t, Options{Tools: testTools()})
	tools := append(testTools(), ToolSpec{Name: "order_medication", Schema: medSchema, Rules: []RuleSpec{
		{When: "args.dose_mg > 10"},
		{When: "args.dose > 10"},
		{When: "args.dose_mg > 10", Stages: []StageSpec{{Name: "a"}, {Name: "A"}}},
	}})
	_, err := Register(e.b, Options{Tools: tools})
	if err == nil {
		t.Fatal("Register accepted a rule that does not type-check")
	}
	for _, want := range []string{"(order_medication): rules[1].when: at line 1, column 5: undefined field 'dose'", `rules[2].stages[1].name: "A" is used twice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Register: %v\nwant %q in it", err, want)
		}
	}
}

// TestStagesInOrder is the ordered sign-off in the core: the prescriber
// stage first (a pharmacist is refused while it is open), then the
// pharmacist stage (the prescriber may not approve it too, a member who
// is not a pharmacist is refused, step-up is required), the receipt
// naming both; a deny at stage 2 ends it; an edit at stage 2 restarts at
// stage 1; below the threshold one prescriber suffices.
func TestStagesInOrder(t *testing.T) {
	e := newRulesEnv(t)
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	drA := e.principal("dr_a", policy.RoleMember, "person")
	drB := e.principal("dr_b", policy.RoleMember, "person")
	lee := e.principal("ph_lee", policy.RoleMember, "person")
	kim := e.principal("ph_kim", policy.RoleMember, "person")
	now := e.clock.Now()
	high := map[string]any{"drug": "apixaban", "dose_mg": 50}

	d, _ := e.ok(agent, "confirm_action", medCall(high))
	id := d["request_id"].(string)
	// While the prescriber stage is open, a pharmacist who is also a
	// member counts for it.
	got, text := e.ok(lee, "approve_action", map[string]any{"request_id": id})
	if got["status"] != "pending" || !strings.Contains(text, "The pharmacist stage (2 of 2) is open") {
		t.Fatalf("after the prescriber: %v %s, want pending and a text naming %q", got["status"], text, "The pharmacist stage (2 of 2) is open")
	}
	// ph_lee may not approve the pharmacist stage too; dr_b is no pharmacist.
	if be := e.fail(steppedUp(lee, now, 0), "approve_action", map[string]any{"request_id": id}); be.Kind != bot.KindDenied || !strings.Contains(be.Msg, "approved the prescriber stage of "+id+", and one person approves at most one stage") {
		t.Fatalf("the prescriber at the pharmacist stage: %v (kind %d), want KindDenied naming %q", be, be.Kind, "approved the prescriber stage of "+id+", and one person approves at most one stage")
	}
	if be := e.fail(steppedUp(drB, now, 0), "approve_action", map[string]any{"request_id": id}); !strings.Contains(be.Msg, "the open stage of "+id+" (pharmacist, stage 2 of 2) is decided by groups pharmacists") {
		t.Fatalf("a member outside pharmacists: %v, want a refusal naming %q", be, "the open stage of "+id+" (pharmacist, stage 2 of 2) is decided by groups pharmacists")
	}
	// A pharmacist with an API key is refused for step-up; after a fresh
	// sign-in, approved.
	if be := e.fail(kim, "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckStepUp) {
		t.Fatalf("a pharmacist without step-up: %v, want CheckStepUp", be)
	}
	got, _ = e.ok(steppedUp(kim, now, time.Minute), "approve_action", map[string]any{"request_id": id})
	if got["status"] != "approved" || got["confirmed_by"] != lee.String()+", "+steppedUp(kim, now, 0).String() {
		t.Fatalf("after the pharmacist: %v confirmed_by %v, want approved confirmed by %q", got["status"], got["confirmed_by"], lee.String()+", "+steppedUp(kim, now, 0).String())
	}
	stages, _ := got["stages"].([]any)
	if len(stages) != 2 || stages[0].(map[string]any)["approved_by"].([]any)[0] != lee.String() || stages[1].(map[string]any)["state"] != "done" {
		t.Fatalf("stages in action_status: %v, want 2, the first approved by %s, the second done", got["stages"], lee.String())
	}
	// The signed receipt names every stage's approvers, in order.
	if p, err := receipt.Verify(got["receipt"].(string), e.b.PublicKey(), e.clock.Now()); err != nil || p.ConfirmedBy != lee.String()+", "+kim.String() {
		t.Fatalf("the receipt: %+v %v, want confirmed by %q and no error", p, err, lee.String()+", "+kim.String())
	}

	// A deny at stage 2 ends it.
	d, _ = e.ok(agent, "confirm_action", medCall(high))
	id = d["request_id"].(string)
	e.ok(drB, "approve_action", map[string]any{"request_id": id})
	got, _ = e.ok(kim, "deny_action", map[string]any{"request_id": id, "reason": "interacts with warfarin"})
	if got["status"] != "denied" {
		t.Fatalf("deny at the pharmacist stage: %v, want status denied", got)
	}

	// An edit at stage 2 restarts at stage 1: the pharmacist's edit counts
	// for no stage, a prescriber approves the edited arguments, then a
	// pharmacist (not the editor's earlier stage: the editor approved none).
	d, _ = e.ok(agent, "confirm_action", medCall(high))
	id = d["request_id"].(string)
	e.ok(drA, "approve_action", map[string]any{"request_id": id})
	edited := map[string]any{"drug": "apixaban", "dose_mg": 40}
	got, text = e.ok(steppedUp(lee, now, 0), "approve_action", map[string]any{"request_id": id, "arguments": edited})
	if got["status"] != "pending" || !strings.Contains(text, "starts again at the first stage") || !strings.Contains(text, "The prescriber stage (1 of 2) is open") {
		t.Fatalf("edit at stage 2: %v %s, want pending and a text naming %q and %q", got["status"], text, "starts again at the first stage", "The prescriber stage (1 of 2) is open")
	}
	sum := got["edited_args_sha256"].(string)
	if r := e.request(id); r.OpenStage() != 0 {
		t.Fatalf("open stage after the edit: %d, want 0", r.OpenStage())
	}
	e.ok(drB, "approve_action", map[string]any{"request_id": id, "args_sha256": sum})
	got, _ = e.ok(steppedUp(lee, now, 0), "approve_action", map[string]any{"request_id": id, "args_sha256": sum})
	if got["status"] != "approved" || !strings.Contains(got["confirmed_by"].(string), "dr_b") || strings.Contains(got["confirmed_by"].(string), "dr_a") {
		t.Fatalf("after the edit: %v confirmed_by %v, want approved, confirmed by dr_b and not dr_a", got["status"], got["confirmed_by"])
	}
	// An edit that would fall under another rule is refused.
	d, _ = e.ok(agent, "confirm_action", medCall(high))
	be := e.fail(drA, "approve_action", map[string]any{"request_id": d["request_id"], "arguments": map[string]any{"drug": "apixaban", "dose_mg": 5}})
	if be.Kind != bot.KindInvalid || !strings.Contains(be.Msg, "the edited arguments fall under no rule, but") {
		t.Fatalf("an edit below the threshold: %v (kind %d), want KindInvalid naming %q", be, be.Kind, "the edited arguments fall under no rule, but")
	}

	// Below the threshold one prescriber suffices.
	d, _ = e.ok(agent, "confirm_action", medCall(map[string]any{"drug": "apixaban", "dose_mg": 5}))
	if got, _ := e.ok(drA, "approve_action", map[string]any{"request_id": d["request_id"]}); got["status"] != "approved" {
		t.Fatalf("below the threshold: %v, want status approved", got)
	}
}

// TestGroupsAtDecisionTime: a group's membership is read when the
// decision is made, from the configuration and from what the identity
// provider asserts (Caller.Groups).
func TestGroupsAtDecisionTime(t *testing.T) {
	e := newRulesEnv(t)
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	drA := e.principal("dr_a", policy.RoleMember, "person")
	ng := e.principal("ph_ng", policy.RoleMember, "person")
	now := e.clock.Now()
	d, _ := e.ok(agent, "confirm_action", medCall(map[string]any{"drug": "apixaban", "dose_mg": 50}))
	id := d["request_id"]
	e.ok(drA, "approve_action", map[string]any{"request_id": id})
	if be := e.fail(steppedUp(ng, now, 0), "approve_action", map[string]any{"request_id": id}); be.Kind != bot.KindDenied {
		t.Fatalf("ph_ng outside pharmacists: %v (kind %d), want KindDenied", be, be.Kind)
	}
	claimed := steppedUp(ng, now, 0)
	claimed.Groups = []string{"Pharmacists"} // the OIDC groups claim, any case
	if got, _ := e.ok(claimed, "approve_action", map[string]any{"request_id": id}); got["status"] != "approved" {
		t.Fatalf("ph_ng with the groups claim: %v, want status approved", got)
	}
}

// TestOnCallAtDecisionTime: an on-call rotation named among the approvers
// admits whoever is on call when the decision is made: alice during the
// first turn, bob after the hand-over, nobody before the rotation starts.
func TestOnCallAtDecisionTime(t *testing.T) {
	e := &env{t: t, path: t.TempDir() + "/cs.db",
		opts:   Options{Tools: append(testTools(), ToolSpec{Name: "page_restart", Category: "mutating", Timeout: 72 * time.Hour, Approvers: approvals.Approvers{Groups: []string{"ops"}}})},
		oncall: map[string]policy.Rotation{"ops": {People: []string{"alice", "bob"}, Start: start.Add(time.Hour), Length: 24 * time.Hour}}}
	base := newEnv(t, Options{Tools: testTools()})
	e.key, e.clock = base.key, base.clock
	e.open()
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	ask := func() string {
		d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "page_restart", "arguments": map[string]any{}})
		return d["request_id"].(string)
	}
	id := ask()
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": id}); !strings.Contains(be.Msg, "decided by groups ops") {
		t.Fatalf("before the rotation starts: %v, want a refusal naming %q", be, "decided by groups ops")
	}
	e.clock.Advance(2 * time.Hour) // alice's turn
	if be := e.fail(bob, "approve_action", map[string]any{"request_id": id}); be.Kind != bot.KindDenied {
		t.Fatalf("bob off call: %v (kind %d), want KindDenied", be, be.Kind)
	}
	if got, _ := e.ok(alice, "approve_action", map[string]any{"request_id": id}); got["status"] != "approved" {
		t.Fatalf("alice on call: %v, want status approved", got)
	}
	e.clock.Advance(24 * time.Hour) // bob's turn
	id = ask()
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": id}); be.Kind != bot.KindDenied {
		t.Fatalf("alice after the hand-over: %v (kind %d), want KindDenied", be, be.Kind)
	}
	if got, _ := e.ok(bob, "approve_action", map[string]any{"request_id": id}); got["status"] != "approved" {
		t.Fatalf("bob on call: %v, want status approved", got)
	}
}
