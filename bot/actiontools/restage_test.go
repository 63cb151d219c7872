package actiontools

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// TestSuspensionSendsAStagedRequestBack: suspending the person who
// approved an earlier stage sends the request back to that stage; the
// approval of the later stage, given on the strength of it, stops
// counting too (audited as stage_reopened, with a note in the card's
// thread), so the request is approved only once every stage has signed
// off again in order, and never with the suspended person's approval.
func TestSuspensionSendsAStagedRequestBack(t *testing.T) {
	e := &env{t: t, path: t.TempDir() + "/cs.db", groups: policy.Groups{"pharmacists": {"ph_lee"}, "nurses": {"rn_ada"}},
		opts: Options{Tools: append(testTools(), ToolSpec{Name: "order_medication", Category: "mutating", Schema: medSchema, Stages: []StageSpec{
			{Name: "prescriber", Approvers: approvals.Approvers{Principals: []string{"dr_a", "dr_b"}}},
			{Name: "pharmacist", Approvers: approvals.Approvers{Groups: []string{"pharmacists"}}},
			{Name: "nurse", Approvers: approvals.Approvers{Groups: []string{"nurses"}}},
		}})}}
	base := newEnv(t, Options{Tools: testTools()})
	e.key, e.clock = base.key, base.clock
	e.open()
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	drA := e.principal("dr_a", policy.RoleMember, "person")
	drB := e.principal("dr_b", policy.RoleMember, "person")
	lee := e.principal("ph_lee", policy.RoleMember, "person")
	ada := e.principal("rn_ada", policy.RoleMember, "person")

	d, _ := e.ok(agent, "confirm_action", medCall(map[string]any{"drug": "apixaban", "dose_mg": 50}))
	id := d["request_id"].(string)
	e.ok(drA, "approve_action", map[string]any{"request_id": id})
	e.ok(lee, "approve_action", map[string]any{"request_id": id})
	if r := e.request(id); r.OpenStage() != 2 {
		t.Fatalf("open stage after the prescriber and the pharmacist: %d, want 2 (nurse)", r.OpenStage())
	}
	notes := len(e.events("slack", bot.EventNote))

	err := e.b.Update(context.Background(), e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		_, err := tx.Suspend(bot.Suspension{Name: "dr_a", Surface: "admin", Reason: "left the hospital", At: e.clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := e.request(id)
	if r.OpenStage() != 0 || len(r.StageApprovers(1)) != 0 || r.Status != approvals.StatusPending {
		t.Fatalf("after dr_a's suspension: open stage %d, pharmacist approvals %v, %s; want back at the prescriber stage with none", r.OpenStage(), r.StageApprovers(1), r.Status)
	}
	if got := e.audits("stage_reopened"); len(got) != 1 || !strings.Contains(got[0].Detail, "is back at the prescriber stage (1 of 3)") || !strings.Contains(got[0].Detail, "ph_lee") {
		t.Fatalf("stage_reopened entries: %+v, want one naming the stage and ph_lee", got)
	}
	if n := len(e.events("slack", bot.EventNote)); n != notes+1 {
		t.Errorf("%d notes queued for the card's thread after the suspension, want %d", n, notes+1)
	}
	// The nurse cannot approve now: the prescriber stage is open again.
	if be := e.fail(ada, "approve_action", map[string]any{"request_id": id}); !strings.Contains(be.Msg, "prescriber, stage 1 of 3") {
		t.Fatalf("the nurse while the prescriber stage is open again: %v, want a refusal naming %q", be, "prescriber, stage 1 of 3")
	}
	e.ok(drB, "approve_action", map[string]any{"request_id": id})
	if got, _ := e.ok(lee, "approve_action", map[string]any{"request_id": id}); got["status"] != "pending" {
		t.Fatalf("the pharmacist signing off again: %v, want pending", got["status"])
	}
	got, _ := e.ok(ada, "approve_action", map[string]any{"request_id": id})
	if got["status"] != "approved" || got["confirmed_by"] != drB.String()+", "+lee.String()+", "+ada.String() {
		t.Fatalf("after every stage signed off again: %v confirmed by %v, want approved confirmed by %q", got["status"], got["confirmed_by"], drB.String()+", "+lee.String()+", "+ada.String())
	}
}

// TestReadOnlyHintReadsTheOpenStage: the hint a surface shows before a
// decision (bot.Items.ReadOnly) is the one decision rule on the item's
// open stage: a member who is no pharmacist sees a stage-2 item read-only
// and why, a pharmacist by the configured groups (not carried on the
// caller) may decide it, and the prescriber is told they approved an
// earlier stage. Step-up is left to the surface.
func TestReadOnlyHintReadsTheOpenStage(t *testing.T) {
	e := newRulesEnv(t)
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	drB := e.principal("dr_b", policy.RoleMember, "person")
	lee := e.principal("ph_lee", policy.RoleMember, "person")
	kim := e.principal("ph_kim", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", medCall(map[string]any{"drug": "apixaban", "dose_mg": 50}))
	item := func() bot.Item {
		it, err := e.b.Items().Get(context.Background(), e.request(d["request_id"].(string)).ItemID)
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	if why, ro := e.b.Items().ReadOnly(drB, item()); ro {
		t.Fatalf("a member at the prescriber stage: read-only (%s), want them able to decide", why)
	}
	e.ok(lee, "approve_action", map[string]any{"request_id": d["request_id"]})
	it := item()
	for _, tc := range []struct {
		who  *bot.Caller
		want string // "" may decide
	}{
		{drB, "the open stage (pharmacist, stage 2 of 2) is decided by groups pharmacists"},
		{kim, ""},
		{lee, "you approved an earlier stage"},
		{agent, "agents and services do not decide"},
	} {
		why, ro := e.b.Items().ReadOnly(tc.who, it)
		if why != tc.want || ro != (tc.want != "") {
			t.Errorf("%s at the pharmacist stage: read-only %v (%q), want %q", tc.who.Name, ro, why, tc.want)
		}
	}
}
