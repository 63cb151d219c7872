package actiontools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// factTools add order_medication, resting on the patient's allergy and
// active medication, and a quorum-2 variant.
func factTools() []ToolSpec {
	return append(testTools(),
		ToolSpec{Name: "order_medication", Category: "mutating", Schema: map[string]any{"type": "object", "required": []any{"drug"}},
			Timeout: 30 * time.Minute, Context: []string{"allergy", "active_medication"}},
		ToolSpec{Name: "order_chemo", Category: "mutating", Quorum: 2, Context: []string{"allergy"}},
	)
}

var patient = bot.Space{UserID: "patient_42"}

// remember writes a fact into the patient's memory as an intake feed would.
func (e *env) remember(subject, value string) {
	e.t.Helper()
	var o memory.Options
	o = o.WithDefaults()
	err := e.b.Update(context.Background(), e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		_, err := o.Write(tx, patient, memory.Input{Op: memory.OpRemember, Subject: subject, Value: value, Said: value,
			Confidence: memory.DefaultConfidence, Kind: memory.KindState, By: "intake [prin_intake]"}, e.clock.Now())
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func orderCall() map[string]any {
	return map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose": "5 mg twice daily"},
		"summary": "Start apixaban 5 mg twice daily for patient_42", "user_id": "patient_42"}
}

// TestApprovalRestsOnFacts is issue 23 item 3 in the core: the card shows
// the context facts with their verdicts; an approval records them; an
// allergy recorded after the approval makes redeem_receipt refuse with
// the change, sends the request back to pending (audited, the card
// updated and a note in its thread), and the old receipt never redeems;
// a second approval on the new facts redeems.
func TestApprovalRestsOnFacts(t *testing.T) {
	e := newEnv(t, Options{Tools: factTools()})
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	ph := e.principal("ph_lee", policy.RoleMember, "person")
	e.remember("allergy", "none")

	d, _ := e.ok(agent, "confirm_action", orderCall())
	id, item := d["request_id"].(string), uint64(d["item_id"].(float64))
	it, err := e.b.Items().Get(context.Background(), item)
	if err != nil {
		t.Fatal(err)
	}
	if len(it.Facts) != 2 || it.Facts[0].Subject != "allergy" || it.Facts[0].Value != "none" || it.Facts[0].Verdict != "SAFE" {
		t.Fatalf("the card's facts: %+v, want 2, the first allergy none SAFE", it.Facts)
	}
	// Nothing recorded is BLOCKED, with the seeds' reason, before anyone clicks.
	if f := it.Facts[1]; f.Subject != "active_medication" || f.Value != "none" || f.Verdict != "BLOCKED" || len(f.Reasons) != 1 || f.Reasons[0] != "no active fact for this subject — nothing safe to act on" {
		t.Fatalf("an unrecorded subject: %+v, want active_medication none BLOCKED with the one reason %q", f, "no active fact for this subject — nothing safe to act on")
	}
	if !strings.Contains(it.Effect, "If allergy or active_medication changes first, it does not run and comes back for a new decision.") {
		t.Fatalf("the effect does not say the approval rests on the facts: %q, want it to contain %q", it.Effect, "If allergy or active_medication changes first, it does not run and comes back for a new decision.")
	}

	d, _ = e.ok(ph, "approve_action", map[string]any{"request_id": id})
	first := d["receipt"].(string)
	if r := e.request(id); len(r.Facts) != 2 || r.Facts[0].Value != "none" || len(r.Votes[0].Facts) != 2 {
		t.Fatalf("the approval did not record its facts: %+v / %+v; want 2 facts, the first none, and 2 on the first vote", r.Facts, r.Votes)
	}
	if it, _ := e.b.Items().Get(context.Background(), item); it.Status != "approved" || it.Facts[0].Was != "" {
		t.Fatalf("approved card: status %s, facts %+v; want approved, the first fact without a Was", it.Status, it.Facts)
	}

	// An allergy is recorded before the order runs.
	e.clock.Advance(time.Minute)
	e.remember("allergy", "penicillin")
	if it, _ := e.b.Items().Get(context.Background(), item); it.Facts[0].Was != "none" || it.Facts[0].Value != "penicillin" || !strings.Contains(it.Effect, "it will not run") {
		t.Fatalf("the approved card does not show the change: %+v %q; want the first fact penicillin, was none, and an effect naming %q", it.Facts, it.Effect, "it will not run")
	}
	updated, notes := len(e.events("slack", bot.EventUpdated)), len(e.events("slack", bot.EventNote))
	be := e.fail(agent, "redeem_receipt", map[string]any{"receipt": first})
	if be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "allergy: none → penicillin") || !strings.Contains(be.Msg, "pending again") {
		t.Fatalf("redeem after the allergy: %v (kind %d), want KindConflict naming %q and %q", be, be.Kind, "allergy: none → penicillin", "pending again")
	}
	if data, _ := be.Data.(map[string]any); data["status"] != "pending" || data["facts_changed"] != "allergy: none → penicillin" || data["receipt"] != nil {
		t.Fatalf("the refusal's data: %v, want status pending, facts_changed %q and no receipt", be.Data, "allergy: none → penicillin")
	}
	r := e.request(id)
	if r.Status != approvals.StatusPending || r.Round != 1 || r.Reopened != "allergy: none → penicillin" || !r.ExecutedAt.IsZero() || !r.ExpiresAt.Equal(e.clock.Now().Add(30*time.Minute)) {
		t.Fatalf("the request after the refusal: %+v, want pending, round 1, reopened %q, not executed, expiring at %v", r, "allergy: none → penicillin", e.clock.Now().Add(30*time.Minute))
	}
	if n := len(e.audits("action_reopened")); n != 1 {
		t.Fatalf("%d action_reopened entries, want 1", n)
	}
	if len(e.events("slack", bot.EventUpdated)) != updated+1 || len(e.events("slack", bot.EventNote)) != notes+1 {
		t.Fatal("the cards were not told: no updated event and note")
	}
	it, _ = e.b.Items().Get(context.Background(), item)
	if !it.Pending() || it.Reopened != "allergy: none → penicillin" || it.Facts[0].Value != "penicillin" {
		t.Fatalf("the reopened card: %+v, want pending, reopened %q, the first fact penicillin", it, "allergy: none → penicillin")
	}
	if pend, _ := e.b.Items().Pending(context.Background(), 10); len(pend) != 1 || pend[0].ID != item {
		t.Fatalf("the reopened item is not open: %+v, want it (%d) the only pending item", pend, item)
	}

	// The old receipt never redeems, before or after a new approval.
	if be := e.fail(agent, "redeem_receipt", map[string]any{"receipt": first}); be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "earlier approval") {
		t.Fatalf("the old receipt while pending: %v (kind %d), want KindConflict naming %q", be, be.Kind, "earlier approval")
	}
	d, _ = e.ok(ph, "approve_action", map[string]any{"request_id": id})
	second := d["receipt"].(string)
	if second == first {
		t.Fatal("the new approval issued the old receipt")
	}
	if be := e.fail(agent, "redeem_receipt", map[string]any{"receipt": first}); be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "earlier approval") {
		t.Fatalf("the old receipt after the new approval: %v (kind %d), want KindConflict naming %q", be, be.Kind, "earlier approval")
	}
	res, _ := e.ok(agent, "redeem_receipt", map[string]any{"receipt": second})
	if res["executed_at"] == nil {
		t.Fatalf("the new receipt did not redeem: %v, want an executed_at", res)
	}
}

// TestAnApprovalOnOtherFactsDoesNotCount: under a quorum, an approval
// given before a context fact changed no longer counts towards one given
// after; a card that showed other facts is refused; a truncated card of a
// destructive call is refused.
func TestAnApprovalOnOtherFactsDoesNotCount(t *testing.T) {
	e := newEnv(t, Options{Tools: factTools()})
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	e.remember("allergy", "none")
	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "order_chemo", "arguments": map[string]any{"drug": "x"}, "user_id": "patient_42"})
	id := d["request_id"].(string)
	e.ok(alice, "approve_action", map[string]any{"request_id": id})

	var shown string
	_ = e.b.View(context.Background(), func(tx kv.Tx) error {
		fs, _, err := contextFacts(tx, patient, []string{"allergy"}, e.clock.Now())
		shown = digestOf(fs)
		return err
	})
	e.remember("allergy", "penicillin")
	seen := map[string]any{"sha256": strings.Repeat("a", 64), "surface": "slack", "facts": shown}
	if be := e.fail(bob, "approve_action", map[string]any{"request_id": id, "seen": seen}); be.Kind != bot.KindConflict || be.Field != "seen.facts" || !strings.Contains(be.Msg, "allergy: penicillin") {
		t.Fatalf("an approval on facts no longer standing: %v (kind %d), want KindConflict on field seen.facts naming %q", be, be.Kind, "allergy: penicillin")
	}
	d, text := e.ok(bob, "approve_action", map[string]any{"request_id": id, "seen": map[string]any{"sha256": strings.Repeat("b", 64), "surface": "discord"}})
	if d["status"] != "pending" || d["tally"] != "1 of 2 approvals: bob" || !strings.Contains(text, "allergy: none → penicillin") {
		t.Fatalf("bob after the allergy: %v %s, want status pending, tally %q and a text naming %q", d, text, "1 of 2 approvals: bob", "allergy: none → penicillin")
	}
	r := e.request(id)
	if v := r.Votes[len(r.Votes)-1]; v.Seen == nil || v.Seen.Surface != "discord" || v.Round != 1 {
		t.Fatalf("bob's vote: %+v, want seen on discord, round 1", v)
	}
	d, _ = e.ok(alice, "approve_action", map[string]any{"request_id": id})
	if d["status"] != "approved" {
		t.Fatalf("alice again, on the new facts: %v, want status approved", d)
	}

	// A destructive call approved from a card cut to fit: refused.
	dd, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	cut := map[string]any{"sha256": strings.Repeat("c", 64), "surface": "slack", "truncated": true}
	be := e.fail(alice, "approve_action", map[string]any{"request_id": dd["request_id"], "seen": cut})
	if be.Kind != bot.KindInvalid || be.Field != "seen" || !strings.Contains(be.Msg, "cut to fit") {
		t.Fatalf("a destructive approval from a truncated card: %v (kind %d), want KindInvalid on field seen naming %q", be, be.Kind, "cut to fit")
	}
	if st, _ := e.ok(agent, "action_status", map[string]any{"request_id": dd["request_id"]}); st["status"] != "pending" {
		t.Fatalf("the refused approval was recorded: %v, want status pending", st)
	}
}

// TestContextIsChecked: tools[].context must name distinct subjects.
func TestContextIsChecked(t *testing.T) {
	for _, tt := range []struct {
		ctx  []string
		says string
	}{
		{[]string{"allergy", " "}, "context[1]: empty"},
		{[]string{"allergy", "Allergy"}, "listed twice"},
		{[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "at most 8"},
	} {
		_, err := compileTool(ToolSpec{Name: "t", Category: "mutating", Context: tt.ctx}, time.Minute, memory.Fold)
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("context %q: %v, want %q", tt.ctx, err, tt.says)
		}
	}
}
