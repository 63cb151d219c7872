package actiontools

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

func breakGlassOptions() Options {
	o := sweepOpts()
	o.Tools = append(testTools(), ToolSpec{Name: "order_medication", Category: "mutating", Stages: []StageSpec{
		{Name: "prescriber", Approvers: approvals.Approvers{Roles: []string{"member"}}},
		{Name: "pharmacist", Approvers: approvals.Approvers{Principals: []string{"ph_lee"}}},
	}})
	o.BreakGlass = BreakGlassSpec{
		Tools: []string{"restart_service", "rollback_production", "order_medication"}, StepUp: 5 * time.Minute,
		ReviewApprovers: approvals.Approvers{Roles: []string{"member"}}, ReviewQuorum: 2, ReviewWithin: 24 * time.Hour,
	}
	return o
}

func (e *env) review(id string) *approvals.Review {
	e.t.Helper()
	var rv *approvals.Review
	err := e.b.View(context.Background(), func(tx kv.Tx) error {
		var err error
		rv, err = approvals.LoadReview(tx, id)
		return err
	})
	if err != nil || rv == nil {
		e.t.Fatalf("load review %s = %v, %v, want a review and no error", id, rv, err)
	}
	return rv
}

// TestBreakGlassInTheService: approve_action with break_glass is the one
// rule's exception and nothing wider (no edit, no grant, not on a denial,
// not another's request, not an agent's); it approves a quorum-2 request
// alone, opens a review whose item goes to every sink, notes the
// break-glass on the request's card, and audits both; the breaker cannot
// countersign; a dispute needs a reason and keeps the review open; the
// sweep escalates an overdue review once, which blocks the breaker's next
// break-glass until the quorum clears it. The store runs every
// transaction twice (kvtest.Twice), so none of it may accumulate.
func TestBreakGlassInTheService(t *testing.T) {
	e := newEnv(t, breakGlassOptions())
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	carol := e.principal("carol", policy.RoleMember, "person")
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	memberAgent := e.principal("ops-bot", policy.RoleMember, "agent") // an agent key with a member's role
	now := e.clock.Now()
	fresh := func(c *bot.Caller) *bot.Caller { return steppedUp(c, e.clock.Now(), time.Minute) }
	ask := func(c *bot.Caller, args map[string]any) string {
		d, _ := e.ok(c, "confirm_action", args)
		return d["request_id"].(string)
	}
	rollback := map[string]any{"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "dry_run": "redeploy v41"}

	id := ask(alice, rollback)
	bg := map[string]any{"request_id": id, "break_glass": true, "reason": "outage, nobody answers"}
	for _, tt := range []struct {
		name  string
		c     *bot.Caller
		tool  string
		args  map[string]any
		check func(*bot.Error) bool
	}{
		{"with an edit", fresh(alice), "approve_action", map[string]any{"request_id": id, "break_glass": true, "reason": "x", "arguments": map[string]any{"to": "v40"}}, func(be *bot.Error) bool { return be.Kind == bot.KindInvalid }},
		{"with a grant", fresh(alice), "approve_action", map[string]any{"request_id": id, "break_glass": true, "reason": "x", "grant": map[string]any{"kind": "once"}}, func(be *bot.Error) bool { return be.Kind == bot.KindInvalid && be.Field == "break_glass" }},
		{"on a denial", fresh(alice), "deny_action", map[string]any{"request_id": id, "break_glass": true, "reason": "x"}, func(be *bot.Error) bool { return be.Field == "break_glass" }},
		{"without a reason", fresh(alice), "approve_action", map[string]any{"request_id": id, "break_glass": true}, func(be *bot.Error) bool { return errors.Is(be, policy.CheckBreakGlass) }},
		{"by someone else", fresh(bob), "approve_action", bg, func(be *bot.Error) bool { return errors.Is(be, policy.CheckBreakGlass) }},
		{"by an API key", alice, "approve_action", bg, func(be *bot.Error) bool { return errors.Is(be, policy.CheckStepUp) }},
		{"by an agent", memberAgent, "approve_action", bg, func(be *bot.Error) bool { return errors.Is(be, policy.CheckPerson) }},
	} {
		if be := e.fail(tt.c, tt.tool, tt.args); !tt.check(be) {
			t.Errorf("%s: %v (kind %v, field %q), want refused", tt.name, be, be.Kind, be.Field)
		}
	}
	if r := e.request(id); r.Status != approvals.StatusPending || len(r.Votes) != 0 {
		t.Fatalf("after the refusals: %s with %d votes, want %s with none", r.Status, len(r.Votes), approvals.StatusPending)
	}
	// An agent's request is never broken open, not even by a person.
	agentReq := ask(agent, map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "api"}})
	if be := e.fail(fresh(alice), "approve_action", map[string]any{"request_id": agentReq, "break_glass": true, "reason": "x"}); !errors.Is(be, policy.CheckBreakGlass) {
		t.Errorf("break-glass on an agent's request: %v, want CheckBreakGlass", be)
	}

	got, _ := e.ok(fresh(alice), "approve_action", bg)
	if _, text := e.ok(fresh(alice), "approve_action", bg); !strings.HasPrefix(text, "Already decided, as you decided it") {
		t.Errorf("the same break-glass again: %q, want the recorded outcome", text)
	}
	r := e.request(id)
	if got["status"] != "approved" || r.BreakGlass == nil || r.ConfirmedBy != fresh(alice).String() {
		t.Fatalf("break-glass of a quorum-2 request: %v, request %+v, confirmed by %q; want approved, a break-glass record, confirmed by %q", got, r.BreakGlass, r.ConfirmedBy, fresh(alice).String())
	}
	rv := e.review(r.BreakGlass.Review)
	if rv.Status != approvals.ReviewOpen || rv.Need() != 2 || !rv.Due.Equal(now.Add(24*time.Hour)) || rv.Reason != "outage, nobody answers" || len(rv.Votes) != 0 {
		t.Fatalf("the review = %+v, want open, needing 2, due %v, reason %q and no votes", rv, now.Add(24*time.Hour), "outage, nobody answers")
	}
	if n := len(e.audits("break_glass")); n != 1 {
		t.Errorf("%d break_glass audit entries, want 1", n)
	}
	var noted, created int
	for _, ev := range e.events("slack", bot.EventNote) {
		if ev.ItemID == r.ItemID && strings.HasPrefix(ev.Note, "BREAK-GLASS: alice approved their own rollback_production request "+id) {
			noted++
		}
	}
	for _, ev := range e.events("slack", bot.EventCreated) {
		if ev.ItemID == rv.ItemID {
			created++
		}
	}
	if noted != 1 || created != 1 {
		t.Fatalf("the broadcast: %d notes on the request's card, %d review items posted; want 1 and 1", noted, created)
	}

	// The review: never the breaker; bob counts once; a dispute keeps it open.
	rid := map[string]any{"review_id": rv.ID}
	if be := e.fail(alice, "countersign_review", rid); !errors.Is(be, policy.CheckRequester) {
		t.Errorf("the breaker countersigning: %v, want CheckRequester", be)
	}
	if be := e.fail(memberAgent, "countersign_review", rid); !errors.Is(be, policy.CheckPerson) {
		t.Errorf("an agent countersigning: %v, want CheckPerson", be)
	}
	// A suspended reviewer's countersignature stops counting.
	dan := e.principal("dan", policy.RoleMember, "person")
	e.ok(dan, "countersign_review", rid)
	if err := e.b.Update(context.Background(), e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		_, err := tx.Suspend(bot.Suspension{Name: "dan", Surface: "admin", Reason: "left", At: e.clock.Now(), By: "root"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := e.review(rv.ID); got.Status != approvals.ReviewOpen || got.Tally() != "0 of 2 countersignatures" {
		t.Fatalf("after dan's suspension: %s, %s; want open with none", got.Status, got.Tally())
	}
	if _, text := e.ok(bob, "countersign_review", rid); !strings.HasPrefix(text, "Counted: 1 of 2 countersignatures: bob") {
		t.Errorf("bob's countersignature: %q, want it to start with %q", text, "Counted: 1 of 2 countersignatures: bob")
	}
	if _, text := e.ok(bob, "countersign_review", rid); !strings.Contains(text, "already counted") {
		t.Errorf("bob again: %q, want it to contain %q", text, "already counted")
	}
	if be := e.fail(carol, "dispute_review", rid); be.Kind != bot.KindInvalid || be.Field != "reason" {
		t.Errorf("a dispute without a reason: %v (kind %d), want KindInvalid on field reason", be, be.Kind)
	}
	e.ok(carol, "dispute_review", map[string]any{"review_id": rv.ID, "reason": "a rollback was not needed"})
	if got := e.review(rv.ID); got.Status != approvals.ReviewOpen || got.Tally() != "1 of 2 countersignatures: bob" {
		t.Fatalf("after the dispute: %s, %s; want %s, %q", got.Status, got.Tally(), approvals.ReviewOpen, "1 of 2 countersignatures: bob")
	}

	// Overdue: escalated once; it blocks alice's next break-glass.
	if rep := e.sweep(23 * time.Hour); rep["break_glass"] != 0 {
		t.Errorf("sweep before the deadline escalated %d, want 0", rep["break_glass"])
	}
	if rep := e.sweep(25 * time.Hour); rep["break_glass"] != 1 {
		t.Errorf("sweep after the deadline escalated %d, want 1", rep["break_glass"])
	}
	if rep := e.sweep(26 * time.Hour); rep["break_glass"] != 0 {
		t.Errorf("a second sweep escalated %d again, want 0", rep["break_glass"])
	}
	if n := len(e.audits("break_glass_review_overdue")); n != 1 {
		t.Errorf("%d overdue audit entries, want 1", n)
	}
	rc, err := CountReviews(context.Background(), e.b, start.Add(25*time.Hour))
	if err != nil || rc != (ReviewCounts{Open: 1, Overdue: 1}) {
		t.Errorf("CountReviews = %+v, %v; want 1 open, 1 overdue", rc, err)
	}
	e.clock.Set(start.Add(25 * time.Hour))
	id2 := ask(alice, map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}})
	bg2 := map[string]any{"request_id": id2, "break_glass": true, "reason": "again"}
	if be := e.fail(fresh(alice), "approve_action", bg2); !errors.Is(be, policy.CheckBreakGlass) || !strings.Contains(be.Msg, rv.ID) {
		t.Fatalf("break-glass with an overdue review: %v, want refused naming %s", be, rv.ID)
	}
	if _, text := e.ok(carol, "countersign_review", rid); !strings.HasPrefix(text, "Cleared: 2 of 2 countersignatures: bob, carol") {
		t.Errorf("carol's countersignature: %q, want it to start with %q", text, "Cleared: 2 of 2 countersignatures: bob, carol")
	}
	if be := e.fail(carol, "countersign_review", rid); be.Kind != bot.KindConflict {
		t.Errorf("countersigning a cleared review: %v (kind %d), want KindConflict", be, be.Kind)
	}
	if got, _ := e.ok(fresh(alice), "approve_action", bg2); got["status"] != "approved" {
		t.Fatalf("break-glass once the review is cleared: %v, want status approved", got)
	}
}

// TestBreakGlassUnderStages: a break-glass decides a request signed off in
// stages at once, by its breaker alone, when the breaker may approve the
// open stage; one whose open stage is another's (a pharmacist's) is not
// theirs to break open.
func TestBreakGlassUnderStages(t *testing.T) {
	e := newEnv(t, breakGlassOptions())
	alice := e.principal("alice", policy.RoleMember, "person")
	fresh := steppedUp(alice, e.clock.Now(), time.Minute)
	order := map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban"}}
	d, _ := e.ok(alice, "confirm_action", order)
	id := d["request_id"].(string)
	got, _ := e.ok(fresh, "approve_action", map[string]any{"request_id": id, "break_glass": true, "reason": "pharmacy closed, patient bleeding"})
	if r := e.request(id); got["status"] != "approved" || r.BreakGlass == nil || len(r.Votes) != 1 || r.Votes[0].Stage != 1 {
		t.Fatalf("break-glass of a staged request: %v, votes %+v; want approved by a break-glass, with one vote, on stage 1", got, r.Votes)
	}
	// The prescriber stage approved by someone else: the open stage is the
	// pharmacist's, which alice may not approve, so she may not break it open.
	d, _ = e.ok(alice, "confirm_action", order)
	id2 := d["request_id"].(string)
	bob := e.principal("bob", policy.RoleMember, "person")
	e.ok(bob, "approve_action", map[string]any{"request_id": id2})
	be := e.fail(steppedUp(alice, e.clock.Now(), time.Minute), "approve_action", map[string]any{"request_id": id2, "break_glass": true, "reason": "x"})
	if !errors.Is(be, policy.CheckApprovers) {
		t.Fatalf("break-glass of another's stage: %v, want CheckApprovers", be)
	}
}

// TestRetentionPrunesClearedReviews: past retention.action_requests a
// cleared break-glass review is deleted with its item, audited; an open
// review stays, however old (it blocks its breaker), and is pruned once
// cleared and old enough.
func TestRetentionPrunesClearedReviews(t *testing.T) {
	o := breakGlassOptions()
	o.Retention = Retention{Actions: 30 * 24 * time.Hour}
	e := newEnv(t, o)
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	carol := e.principal("carol", policy.RoleMember, "person")
	fresh := func(c *bot.Caller) *bot.Caller { return steppedUp(c, e.clock.Now(), time.Minute) }
	breakGlass := func(service string) *approvals.Review {
		d, _ := e.ok(alice, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": service}})
		id := d["request_id"].(string)
		e.ok(fresh(alice), "approve_action", map[string]any{"request_id": id, "break_glass": true, "reason": "outage"})
		return e.review(e.request(id).BreakGlass.Review)
	}
	cleared, open := breakGlass("api"), breakGlass("payments")
	for _, c := range []*bot.Caller{bob, carol} {
		e.ok(c, "countersign_review", map[string]any{"review_id": cleared.ID})
	}
	exists := func(rv *approvals.Review) (review, item bool) {
		err := e.b.View(context.Background(), func(tx kv.Tx) error {
			got, err := approvals.LoadReview(tx, rv.ID)
			if err != nil {
				return err
			}
			rec, err := bot.LoadItemRecord(tx, rv.ItemID)
			review, item = got != nil, rec != nil
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return review, item
	}
	e.sweep(29 * 24 * time.Hour)
	if r, i := exists(cleared); !r || !i {
		t.Fatalf("before its retention the cleared review: review %v, item %v; want both kept", r, i)
	}
	e.sweep(31 * 24 * time.Hour)
	if r, i := exists(cleared); r || i {
		t.Fatalf("past its retention the cleared review: review %v, item %v; want both deleted", r, i)
	}
	if r, i := exists(open); !r || !i {
		t.Fatalf("the open review, however old: review %v, item %v; want it kept", r, i)
	}
	found := false
	for _, a := range e.audits(bot.ActionRetentionPruned) {
		found = found || strings.Contains(a.Detail, "deleted 1 break-glass reviews cleared before")
	}
	if !found {
		t.Errorf("the review's deletion is not audited")
	}
	e.clock.Set(start.Add(31 * 24 * time.Hour))
	for _, c := range []*bot.Caller{bob, carol} {
		e.ok(c, "countersign_review", map[string]any{"review_id": open.ID})
	}
	e.sweep(62 * 24 * time.Hour)
	if r, i := exists(open); r || i {
		t.Fatalf("the late-cleared review past its retention: review %v, item %v; want both deleted", r, i)
	}
}
