package memory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

var t0 = time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC)

// env is a real bbolt store and memory options with the clinical slots.
type env struct {
	t   *testing.T
	db  *bolt.DB
	o   Options
	sp  Space
	now time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	schema, err := NewSchema([]Slot{
		{Name: "active_medication", Category: "active_medication", Verbatim: true, Multi: true, Confirm: true,
			Aliases: []string{"meds", "current_medication"}},
		{Name: "allergy", Category: "allergy", Verbatim: true, Multi: true, Aliases: []string{"Patient Allergy"}},
		{Name: "code_status", Category: "code_status", Confirm: true},
		{Name: "primary_diagnosis"},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Schema: schema, TrustedSources: []string{"FHIR"}, CriticalCategories: []string{"allergy"}}.WithDefaults()
	return &env{t: t, db: db, o: o, sp: Space{UserID: "patient_42"}, now: t0}
}

// write reconciles one statement (remember by default) and returns the plan.
func (e *env) write(in Input) (Plan, error) {
	e.t.Helper()
	if in.Op == 0 {
		in.Op = OpRemember
	}
	if in.Confidence == 0 {
		in.Confidence = DefaultConfidence
	}
	if in.Kind == "" {
		in.Kind = KindState
	}
	if in.By == "" {
		in.By, in.ByID, in.ByName = "ward_bot [prin_agent]", "prin_agent", "ward_bot"
	}
	var p Plan
	err := e.db.Update(context.Background(), func(tx kv.Tx) error {
		var err error
		p, err = e.o.Write(tx, e.sp, in, e.now)
		return err
	})
	if err == nil {
		e.checkInvariant()
	}
	return p, err
}

func (e *env) mustWrite(in Input, want Action) Plan {
	e.t.Helper()
	p, err := e.write(in)
	if err != nil {
		e.t.Fatalf("write %+v: %v", in, err)
	}
	if p.Action != want {
		e.t.Fatalf("write %s=%q: action %s, want %s", in.Subject, in.Value, p.Action, want)
	}
	return p
}

func (e *env) load(id uint64) *Fact {
	e.t.Helper()
	var f *Fact
	if err := e.db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		f, err = Load(tx, e.sp, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	if f == nil {
		e.t.Fatalf("no fact #%d, want one", id)
	}
	return f
}

func (e *env) live(subject string) []*Fact {
	e.t.Helper()
	var out []*Fact
	if err := e.db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		out, err = Live(tx, e.sp, subject)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) activeValues(subject string) []string {
	var vs []string
	for _, f := range e.live(subject) {
		if f.Status == StatusActive {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// checkInvariant asserts one ACTIVE state value per single-valued slot and
// scope, in the whole space, after every write.
func (e *env) checkInvariant() {
	e.t.Helper()
	seen := map[string]uint64{}
	err := e.db.View(context.Background(), func(tx kv.Tx) error {
		return LiveAll(tx, e.sp, func(f *Fact) error {
			r := e.o.Resolve(f.Subject)
			if f.Status != StatusActive || !r.Stateful(f) || r.Multi() {
				return nil
			}
			k := f.Subject + "@" + f.Scope
			if other, dup := seen[k]; dup {
				e.t.Errorf("invariant broken: #%d and #%d both ACTIVE in %s", other, f.ID, k)
			}
			seen[k] = f.ID
			return nil
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestIDsAreSequentialPerSpace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustWrite(Input{Subject: "state", Value: "Redux"}, ActionAdd)
	e.mustWrite(Input{Subject: "state", Value: "Zustand"}, ActionSupersede)
	other := *e
	other.sp = Space{UserID: "patient_7"}
	p := other.mustWrite(Input{Subject: "state", Value: "MobX"}, ActionAdd)
	if p.New.ID != 1 {
		t.Fatalf("first id of another space = %d, want 1", p.New.ID)
	}
	p = e.mustWrite(Input{Subject: "hosting", Value: "Fly.io"}, ActionAdd)
	if p.New.ID != 3 {
		t.Fatalf("third id = %d, want 3", p.New.ID)
	}
}

func TestReconcileActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustWrite(Input{Subject: "state", Value: "Redux"}, ActionAdd)
	e.mustWrite(Input{Subject: "State", Value: "  redux "}, ActionDedup)
	p := e.mustWrite(Input{Subject: "state", Value: "Zustand", Source: "crm"}, ActionSupersede)
	if p.New.Supersedes != 1 || e.load(1).Status != StatusSuperseded || e.load(1).RetiredAt.IsZero() {
		t.Fatalf("supersede: new %+v, old %+v; want the new one to supersede #1, and #1 %s with a retirement time", p.New, e.load(1), StatusSuperseded)
	}
	if got := e.activeValues("state"); len(got) != 1 || got[0] != "Zustand" {
		t.Fatalf("active = %q, want [Zustand]", got)
	}

	// Another scope coexists; the global value stands.
	e.mustWrite(Input{Subject: "deploy_day", Value: "Tuesday"}, ActionAdd)
	e.mustWrite(Input{Subject: "deploy_day", Value: "Friday", Scope: "web"}, ActionCoexist)
	if got := e.activeValues("deploy_day"); len(got) != 2 {
		t.Fatalf("coexist: active = %q, want 2 values", got)
	}

	// Past tense is archived, never current; restated, it dedups.
	p = e.mustWrite(Input{Subject: "database", Value: "MySQL", TimeRef: TimePast}, ActionArchive)
	if p.New.Status != StatusHistorical || !p.New.Archived {
		t.Fatalf("archive: %+v, want status %s, archived", p.New, StatusHistorical)
	}
	e.mustWrite(Input{Subject: "database", Value: "mysql", TimeRef: TimePast}, ActionDedup)
	if got := e.activeValues("database"); len(got) != 0 {
		t.Fatalf("archived value is active: %q, want no active value", got)
	}

	// Future tense is held, not applied: on an empty slot and on a set one.
	p = e.mustWrite(Input{Subject: "hosting", Value: "Fly.io", TimeRef: TimeFuture}, ActionFlag)
	if p.New.Status != StatusFlagged || p.New.Pending != ActionAdd || p.New.Held != HeldFuture {
		t.Fatalf("future on empty slot: %+v, want status %s, pending %s, held %q", p.New, StatusFlagged, ActionAdd, HeldFuture)
	}
	p = e.mustWrite(Input{Subject: "state", Value: "Jotai", TimeRef: TimeFuture}, ActionFlag)
	if p.New.Pending != ActionSupersede || p.New.Supersedes != p.Target.ID {
		t.Fatalf("future change: %+v, want pending %s superseding #%d", p.New, ActionSupersede, p.Target.ID)
	}
	if got := e.activeValues("state"); got[0] != "Zustand" {
		t.Fatalf("future change applied: active = %q, want %q first", got, "Zustand")
	}

	// A change below 0.7 is flagged, not applied; a first value below 0.7 is
	// stored (the safety gate then blocks it).
	p = e.mustWrite(Input{Subject: "state", Value: "Recoil", Confidence: 0.5}, ActionFlag)
	if !strings.Contains(p.New.Held, "confidence 0.5 is below 0.7") {
		t.Fatalf("low-confidence held = %q, want it to contain %q", p.New.Held, "confidence 0.5 is below 0.7")
	}
	if got := e.activeValues("state"); len(got) != 1 || got[0] != "Zustand" {
		t.Fatalf("low-confidence change applied: active = %q, want [Zustand]", got)
	}
	p = e.mustWrite(Input{Subject: "api_timeout", Value: "30s", Confidence: 0.5}, ActionAdd)
	if p.New.Status != StatusActive || p.New.Confidence != 0.5 {
		t.Fatalf("low-confidence first value: %+v, want status %s with confidence 0.5", p.New, StatusActive)
	}
	// A low-confidence COEXIST is held too.
	e.mustWrite(Input{Subject: "deploy_day", Value: "Monday", Scope: "mobile", Confidence: 0.6}, ActionFlag)

	// Retraction: the value retired, a tombstone, the slot empty; again: nothing.
	p = e.mustWrite(Input{Op: OpForget, Subject: "api_timeout"}, ActionRetract)
	if p.New.Value != "(retracted: 30s)" || p.New.Status != StatusHistorical || p.New.Supersedes != p.Target.ID {
		t.Fatalf("tombstone: %+v, want value %q, status %s, superseding #%d", p.New, "(retracted: 30s)", StatusHistorical, p.Target.ID)
	}
	if e.load(p.Target.ID).Status != StatusSuperseded {
		t.Fatal("retracted value still live")
	}
	e.mustWrite(Input{Op: OpForget, Subject: "api_timeout"}, ActionSkip)
	e.mustWrite(Input{Op: OpForget, Subject: "state", Value: "Redux"}, ActionSkip) // not current
}

func TestEventsAreNeverSuperseded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustWrite(Input{Subject: "customer_call", Value: "called on Tuesday", Kind: KindEvent}, ActionAdd)
	e.mustWrite(Input{Subject: "customer_call", Value: "called on Friday", Kind: KindEvent}, ActionAdd)
	e.mustWrite(Input{Subject: "customer_call", Value: "called on Friday", Kind: KindEvent}, ActionDedup)
	if got := e.activeValues("customer_call"); len(got) != 2 {
		t.Fatalf("events: active = %q, want 2 values", got)
	}
	// A state value beside events replaces none of them.
	e.mustWrite(Input{Subject: "customer_call", Value: "none scheduled"}, ActionAdd)
	e.mustWrite(Input{Subject: "customer_call", Value: "one scheduled"}, ActionSupersede)
	if got := e.activeValues("customer_call"); len(got) != 3 {
		t.Fatalf("events retired by a state change: active = %q, want 3 values", got)
	}
	// forget never retracts an event.
	e.mustWrite(Input{Op: OpForget, Subject: "customer_call", Value: "called on Tuesday"}, ActionSkip)
	// On a declared single-valued slot, an event is a change of state.
	e.mustWrite(Input{Subject: "primary_diagnosis", Value: "atrial fibrillation"}, ActionAdd)
	e.mustWrite(Input{Subject: "primary_diagnosis", Value: "atrial flutter", Kind: KindEvent}, ActionSupersede)
}

func TestAliasFoldingAndValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		subject, value, wantSubject, wantValue string
	}{
		{"Meds", "  Warfarin  5mg   daily ", "active_medication", "  Warfarin  5mg   daily "}, // verbatim: byte for byte
		{"patient-allergy", "penicillin", "allergy", "penicillin"},                            // alias, case and separators
		{"ALLERGY", "Sulfa\tdrugs", "allergy", "Sulfa\tdrugs"},
		{"Hosting Provider", "  Fly.io \n  in   Paris ", "hosting_provider", "Fly.io in Paris"}, // normalised
	}
	for _, tc := range tests {
		p := e.mustWrite(Input{Subject: tc.subject, Value: tc.value}, ActionAdd)
		if p.New.Subject != tc.wantSubject || p.New.Value != tc.wantValue {
			t.Errorf("%q=%q stored as %q=%q, want %q=%q", tc.subject, tc.value, p.New.Subject, p.New.Value, tc.wantSubject, tc.wantValue)
		}
	}
	// The declared category stamps every fact of the slot, over the caller's.
	p := e.mustWrite(Input{Subject: "Patient Allergy", Value: "latex", Category: "misc"}, ActionAdd)
	if p.New.Category != "allergy" {
		t.Errorf("category = %q, want allergy", p.New.Category)
	}
	p = e.mustWrite(Input{Subject: "note", Value: "x", Category: "critical_note"}, ActionAdd)
	if p.New.Category != "critical_note" {
		t.Errorf("undeclared category = %q, want critical_note", p.New.Category)
	}
}

func TestListSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fhir := func(in Input) Input { in.Source, in.Trusted = "fhir", true; return in }
	e.mustWrite(fhir(Input{Subject: "active_medication", Value: "warfarin 5mg daily"}), ActionAdd)
	// A new distinct item joins the list: an ADD, not gated, even from an agent.
	e.mustWrite(Input{Subject: "active_medication", Value: "metformin 500 mg twice daily"}, ActionAdd)
	if got := e.activeValues("active_medication"); len(got) != 2 {
		t.Fatalf("list: active = %q, want 2 items", got)
	}
	// A change of dose is a replacement of that item (by identity), from a
	// trusted source applied at once.
	p := e.mustWrite(fhir(Input{Subject: "active_medication", Value: "Warfarin 7 mg PO daily"}), ActionSupersede)
	if p.Target.Value != "warfarin 5mg daily" {
		t.Fatalf("identity replaced %q, want %q", p.Target.Value, "warfarin 5mg daily")
	}
	// "stop the metformin" finds metformin, not warfarin.
	p = e.mustWrite(fhir(Input{Op: OpForget, Subject: "active_medication", Said: "stop the metformin"}), ActionRetract)
	if p.Target.Value != "metformin 500 mg twice daily" {
		t.Fatalf("forget by sentence removed %q, want %q", p.Target.Value, "metformin 500 mg twice daily")
	}
	e.mustWrite(fhir(Input{Subject: "active_medication", Value: "metformin 500 mg twice daily"}), ActionAdd)
	p = e.mustWrite(fhir(Input{Op: OpForget, Subject: "active_medication", Value: "metformin"}), ActionRetract)
	if p.Target.Value != "metformin 500 mg twice daily" {
		t.Fatalf("forget by value removed %q, want %q", p.Target.Value, "metformin 500 mg twice daily")
	}
	if got := e.activeValues("active_medication"); len(got) != 1 || got[0] != "Warfarin 7 mg PO daily" {
		t.Fatalf("after removals: active = %q, want only %q", got, "Warfarin 7 mg PO daily")
	}
	// Several items and nothing saying which: a clear error naming the field.
	e.mustWrite(fhir(Input{Subject: "active_medication", Value: "aspirin 81 mg daily"}), ActionAdd)
	_, err := e.write(fhir(Input{Op: OpForget, Subject: "active_medication"}))
	var me *policy.Error
	if !errors.As(err, &me) || me.Kind != policy.KindInvalid || me.Field != "value" {
		t.Fatalf("ambiguous forget: %v, want an invalid-argument *policy.Error on field %q", err, "value")
	}
	// replaces names the item a new value replaces.
	p = e.mustWrite(fhir(Input{Subject: "active_medication", Value: "apixaban 5mg twice daily", Replaces: "warfarin"}), ActionSupersede)
	if p.Target.Value != "Warfarin 7 mg PO daily" {
		t.Fatalf("replaces hit %q, want %q", p.Target.Value, "Warfarin 7 mg PO daily")
	}
	_, err = e.write(fhir(Input{Subject: "active_medication", Value: "heparin", Replaces: "insulin"}))
	if !errors.As(err, &me) || me.Kind != policy.KindConflict {
		t.Fatalf("replaces nothing: %v, want a conflict *policy.Error", err)
	}
}

func TestListIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Warfarin 5 mg PO daily", "warfarin"},
		{"warfarin 5mg daily", "warfarin"},
		{"Vitamin D3 1000 IU", "vitamin d3"},
		{"Insulin glargine — 10 units at night", "insulin glargine"},
		{"penicillin - rash", "penicillin"},
		{"Penicillin", "penicillin"},
		{"5mg something", "5mg something"},
	}
	for _, tc := range tests {
		if got := ListIdentity(tc.in); got != tc.want {
			t.Errorf("ListIdentity(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConfirmGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A first write to a gated slot is not gated.
	e.mustWrite(Input{Subject: "code_status", Value: "full code"}, ActionAdd)
	// A replacement is, whatever the caller called it: remember of another
	// value is effectively a SUPERSEDE.
	p := e.mustWrite(Input{Subject: "code_status", Value: "DNR", Said: "She said DNR."}, ActionFlag)
	if !p.Held || p.New.Pending != ActionSupersede || p.New.Supersedes != 1 || !p.New.Gated() || p.New.Target != "full code" {
		t.Fatalf("proposal: %+v, want held and gated, pending %s superseding #1, target %q", p.New, ActionSupersede, "full code")
	}
	if p.New.ProposerID != "prin_agent" || p.New.ProposedAt != t0 {
		t.Fatalf("proposer: %+v, want proposer %q at %v", p.New, "prin_agent", t0)
	}
	if got := e.activeValues("code_status"); len(got) != 1 || got[0] != "full code" {
		t.Fatalf("current value changed: active = %q, want [full code]", got)
	}
	// The same change proposed twice is queued once.
	d := e.mustWrite(Input{Subject: "code_status", Value: "dnr"}, ActionDedup)
	if d.Existing.ID != p.New.ID {
		t.Fatalf("dedup of #%d, want #%d", d.Existing.ID, p.New.ID)
	}
	// A different replacement is a second proposal.
	e.mustWrite(Input{Subject: "code_status", Value: "DNI"}, ActionFlag)
	// Removal is gated; the same removal twice is queued once.
	r := e.mustWrite(Input{Op: OpForget, Subject: "code_status", Said: "drop it"}, ActionFlag)
	if r.New.Pending != ActionRetract || r.New.Value != "full code" {
		t.Fatalf("removal proposal: %+v, want pending %s of %q", r.New, ActionRetract, "full code")
	}
	e.mustWrite(Input{Op: OpForget, Subject: "code_status", Said: "drop it please"}, ActionDedup)
	// A trusted source skips the gate.
	e.mustWrite(Input{Subject: "code_status", Value: "comfort care", Source: "fhir", Trusted: true}, ActionSupersede)

	// A human edit: an approver applies it, anyone else proposes.
	id := e.live("code_status")
	var cur *Fact
	for _, f := range id {
		if f.Status == StatusActive {
			cur = f
		}
	}
	p = e.mustWrite(Input{Op: OpEdit, Target: cur.ID, Value: "full code"}, ActionFlag)
	if p.New.Pending != ActionSupersede {
		t.Fatalf("edit proposal: %+v, want pending %s", p.New, ActionSupersede)
	}
	p = e.mustWrite(Input{Op: OpEdit, Target: cur.ID, Value: "full code", Approver: true, By: "dr_smith [prin_m]"}, ActionSupersede)
	if p.New.SetBy != "dr_smith [prin_m]" || p.New.Said != "(edit) full code" || p.New.Confidence != cur.Confidence {
		t.Fatalf("approved edit: %+v, want set by %q, said %q, confidence %v", p.New, "dr_smith [prin_m]", "(edit) full code", cur.Confidence)
	}
	// Editing a retired value is refused.
	_, err := e.write(Input{Op: OpEdit, Target: cur.ID, Value: "x", Approver: true})
	var me *policy.Error
	if !errors.As(err, &me) || me.Kind != policy.KindConflict {
		t.Fatalf("edit of retired: %v, want a conflict *policy.Error", err)
	}
	_, err = e.write(Input{Op: OpEdit, Target: 999, Value: "x"})
	if !errors.As(err, &me) || me.Kind != policy.KindNotFound || me.Msg != "No memory with id #999." {
		t.Fatalf("edit of unknown: %v, want a not-found *policy.Error saying %q", err, "No memory with id #999.")
	}
}

// decide confirms or rejects in one transaction.
func (e *env) confirm(id uint64) (Decision, error) {
	var d Decision
	err := e.db.Update(context.Background(), func(tx kv.Tx) error {
		var err error
		d, err = e.o.Confirm(tx, e.sp, id, Decider{By: "dr_smith [prin_m]", Note: "dr_smith"}, e.now)
		return err
	})
	if err == nil {
		e.checkInvariant()
	}
	return d, err
}

func (e *env) reject(id uint64) (Decision, error) {
	var d Decision
	err := e.db.Update(context.Background(), func(tx kv.Tx) error {
		var err error
		d, err = e.o.Reject(tx, e.sp, id, Decider{By: "dr_smith [prin_m]"}, e.now)
		return err
	})
	return d, err
}

func TestSeedScenario(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustWrite(Input{Subject: "active_medication", Value: "warfarin 5mg daily", Source: "fhir", Trusted: true}, ActionAdd)
	p2 := e.mustWrite(Input{Subject: "active_medication", Value: "apixaban 5mg twice daily", Replaces: "warfarin", Said: "Switch her to apixaban 5mg twice daily."}, ActionFlag)
	p3 := e.mustWrite(Input{Op: OpForget, Subject: "active_medication", Value: "warfarin", Said: "Maybe stop the warfarin."}, ActionFlag)
	if p2.New.ID != 2 || p3.New.ID != 3 {
		t.Fatalf("proposal ids %d, %d; want 2, 3", p2.New.ID, p3.New.ID)
	}
	var lines []PendingLine
	err := e.db.View(context.Background(), func(tx kv.Tx) error {
		open, err := OpenProposals(tx, e.sp)
		for _, f := range open {
			tgt, _ := Load(tx, e.sp, f.Supersedes)
			lines = append(lines, PendingLine{Fact: f, Current: tgt.Value, TargetActive: tgt.Status == StatusActive})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "2 change(s) awaiting approval:\n" +
		"  #2 REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'\n" +
		"        said: 'Switch her to apixaban 5mg twice daily.'\n" +
		"  #3 REMOVE active_medication: 'warfarin 5mg daily'\n" +
		"        said: 'Maybe stop the warfarin.'\n\n" +
		"Approve with confirm_change(memory_id), discard with reject_change(memory_id)."
	if got := RenderPending(lines); got != want {
		t.Fatalf("pending:\n%s\nwant:\n%s", got, want)
	}

	d, err := e.confirm(2)
	if err != nil || d.Closed != "" || d.Applied != ActionSupersede {
		t.Fatalf("confirm #2: %+v, %v; want applied %s, not closed, no error", d, err, ActionSupersede)
	}
	if f := e.load(2); f.Status != StatusActive || f.Resolved != ResolvedConfirmed || f.DecidedBy != "dr_smith [prin_m]" || f.Note != "dr_smith" {
		t.Fatalf("#2 after confirm: %+v, want status %s, resolved %s, decided by %q, note %q", f, StatusActive, ResolvedConfirmed, "dr_smith [prin_m]", "dr_smith")
	}
	if f := e.load(1); f.Status != StatusSuperseded {
		t.Fatalf("#1 after confirm: %s, want %s", f.Status, StatusSuperseded)
	}
	// Confirming twice: not awaiting approval.
	var me *policy.Error
	if _, err := e.confirm(2); !errors.As(err, &me) || me.Kind != policy.KindConflict || me.Msg != NotAwaiting(2) {
		t.Fatalf("second confirm: %v, want a conflict *policy.Error saying %q", err, NotAwaiting(2))
	}
	// #3 targeted warfarin, now retired: confirming it is refused and closes it.
	d, err = e.confirm(3)
	if err != nil || d.Closed != ResolvedStale {
		t.Fatalf("stale confirm: %+v, %v; want closed %s, no error", d, err, ResolvedStale)
	}
	if f := e.load(3); f.Status != StatusHistorical || f.Resolved != ResolvedStale || f.Open() {
		t.Fatalf("#3 after stale confirm: %+v, want status %s, resolved %s, not open", f, StatusHistorical, ResolvedStale)
	}
	if _, err := e.reject(3); !errors.As(err, &me) || me.Msg != "#3 is not awaiting approval." {
		t.Fatalf("reject closed: %v, want a *policy.Error saying %q", err, "#3 is not awaiting approval.")
	}
	if _, err := e.confirm(99); !errors.As(err, &me) || me.Kind != policy.KindNotFound {
		t.Fatalf("confirm unknown: %v, want a not-found *policy.Error", err)
	}
	if got := e.activeValues("active_medication"); len(got) != 1 || got[0] != "apixaban 5mg twice daily" {
		t.Fatalf("active = %q, want only %q", got, "apixaban 5mg twice daily")
	}
}

func TestRejectAndRetractConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustWrite(Input{Subject: "active_medication", Value: "warfarin 5mg daily", Source: "fhir", Trusted: true}, ActionAdd)
	e.mustWrite(Input{Subject: "active_medication", Value: "apixaban 5mg twice daily", Replaces: "warfarin"}, ActionFlag)
	e.mustWrite(Input{Op: OpForget, Subject: "active_medication", Value: "warfarin"}, ActionFlag)
	// A rejected proposal stays as HISTORICAL; the current value is unchanged.
	if _, err := e.reject(2); err != nil {
		t.Fatal(err)
	}
	if f := e.load(2); f.Status != StatusHistorical || f.Resolved != ResolvedRejected {
		t.Fatalf("rejected: %+v, want status %s, resolved %s", f, StatusHistorical, ResolvedRejected)
	}
	// Confirming the removal retires warfarin and writes the tombstone.
	d, err := e.confirm(3)
	if err != nil || d.Applied != ActionRetract || d.Target.ID != 1 {
		t.Fatalf("confirm removal: %+v %v; want applied %s to #1, no error", d, err, ActionRetract)
	}
	if f := e.load(3); f.Value != "(retracted: warfarin 5mg daily)" || f.Status != StatusHistorical {
		t.Fatalf("tombstone: %+v, want value %q, status %s", f, "(retracted: warfarin 5mg daily)", StatusHistorical)
	}
	if got := e.activeValues("active_medication"); len(got) != 0 {
		t.Fatalf("active after removal: %q, want none", got)
	}
}

func TestReconcilePolicyModes(t *testing.T) {
	t.Parallel()
	set := func(e *env, p policy.ReconcilePolicy) {
		if err := e.db.Update(context.Background(), func(tx kv.Tx) error { return SavePolicy(tx, e.sp, p, "ops [prin_a]") }); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("AUTHORITY", func(t *testing.T) {
		e := newEnv(t)
		set(e, policy.ReconcilePolicy{Mode: policy.ModeAuthority, Authority: []policy.SourceRank{{Source: "crm", Rank: 2}, {Source: "bot", Rank: 1}}})
		e.mustWrite(Input{Subject: "plan", Value: "Pro", Source: "crm"}, ActionAdd)
		p := e.mustWrite(Input{Subject: "plan", Value: "Free", Source: "bot"}, ActionFlag)
		if !strings.Contains(p.New.Held, "does not outrank") {
			t.Fatalf("held = %q, want it to contain %q", p.New.Held, "does not outrank")
		}
		e.mustWrite(Input{Subject: "plan", Value: "Enterprise", Source: "crm"}, ActionSupersede) // self-correction
		e.mustWrite(Input{Subject: "tier", Value: "gold", Source: "bot"}, ActionAdd)
		e.mustWrite(Input{Subject: "tier", Value: "silver", Source: "crm"}, ActionSupersede) // higher wins
	})
	t.Run("REVIEW", func(t *testing.T) {
		e := newEnv(t)
		set(e, policy.ReconcilePolicy{Mode: policy.ModeReview})
		e.mustWrite(Input{Subject: "plan", Value: "Pro", Source: "crm"}, ActionAdd)
		e.mustWrite(Input{Subject: "plan", Value: "Free", Source: "bot"}, ActionFlag)
		e.mustWrite(Input{Subject: "plan", Value: "Basic"}, ActionFlag)                // an empty source is another source
		e.mustWrite(Input{Subject: "plan", Value: "free", Source: "bot"}, ActionDedup) // the same held change
		e.mustWrite(Input{Subject: "plan", Value: "Team", Source: "CRM"}, ActionSupersede)
	})
	t.Run("RECENCY", func(t *testing.T) {
		e := newEnv(t)
		e.mustWrite(Input{Subject: "plan", Value: "Pro", Source: "crm"}, ActionAdd)
		e.mustWrite(Input{Subject: "plan", Value: "Free", Source: "bot"}, ActionSupersede)
	})
}

func TestHeldAddBecomesStaleWhenSlotFills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.mustWrite(Input{Subject: "hosting", Value: "Fly.io", TimeRef: TimeFuture}, ActionFlag)
	e.mustWrite(Input{Subject: "hosting", Value: "Heroku"}, ActionAdd)
	d, err := e.confirm(p.New.ID)
	if err != nil || d.Closed != ResolvedStale {
		t.Fatalf("confirm held ADD after slot filled: %+v %v; want closed %s, no error", d, err, ResolvedStale)
	}
	// While the slot is empty, a held ADD applies.
	p = e.mustWrite(Input{Subject: "region", Value: "eu-west", TimeRef: TimeFuture}, ActionFlag)
	d, err = e.confirm(p.New.ID)
	if err != nil || d.Closed != "" || e.load(p.New.ID).Status != StatusActive {
		t.Fatalf("confirm held ADD: %+v %v; want it applied (not closed, #%d %s), no error", d, err, p.New.ID, StatusActive)
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.o.ProposalMaxAge = 48 * time.Hour
	e.mustWrite(Input{Subject: "code_status", Value: "full code"}, ActionAdd)
	e.mustWrite(Input{Subject: "code_status", Value: "DNR"}, ActionFlag)                     // #2: will go stale
	e.mustWrite(Input{Subject: "active_medication", Value: "warfarin 5mg daily"}, ActionAdd) // #3
	e.mustWrite(Input{Op: OpForget, Subject: "active_medication"}, ActionFlag)               // #4: will expire
	e.mustWrite(Input{Subject: "code_status", Value: "comfort care", Source: "fhir", Trusted: true}, ActionSupersede)
	sweep := func(now time.Time, scan, close int) []*Fact {
		var all []*Fact
		var after []byte
		for {
			var closed []*Fact
			var more bool
			err := e.db.Update(context.Background(), func(tx kv.Tx) error {
				var err error
				closed, after, more, err = e.o.SweepOpen(tx, after, now, scan, close)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, closed...)
			if !more {
				return all
			}
		}
	}
	closed := sweep(t0.Add(time.Hour), 1, 1)
	if len(closed) != 1 || closed[0].ID != 2 || closed[0].Resolved != ResolvedStale {
		t.Fatalf("first sweep closed %+v, want only #2, resolved %s", closed, ResolvedStale)
	}
	if got := sweep(t0.Add(2*time.Hour), 1, 1); len(got) != 0 {
		t.Fatalf("second sweep closed %d, want 0", len(got))
	}
	closed = sweep(t0.Add(48*time.Hour), 10, 10)
	if len(closed) != 1 || closed[0].ID != 4 || closed[0].Resolved != ResolvedExpired || closed[0].Status != StatusHistorical {
		t.Fatalf("expiry sweep closed %+v, want only #4, resolved %s, status %s", closed, ResolvedExpired, StatusHistorical)
	}
	var open []*Fact
	_ = e.db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		open, err = OpenProposals(tx, e.sp)
		return err
	})
	if len(open) != 0 {
		t.Fatalf("open after sweeps: %d, want 0", len(open))
	}
	if got := e.activeValues("active_medication"); len(got) != 1 {
		t.Fatalf("expiry changed the current value: active = %q, want 1 value", got)
	}
}

func TestGateOnEffectiveAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustWrite(Input{Subject: "active_medication", Value: "warfarin 5mg daily", Source: "fhir", Trusted: true}, ActionAdd)
	// The caller only "remembers" a value; reconciliation finds it replaces
	// the warfarin item (same identity), so it is gated like any replacement.
	p := e.mustWrite(Input{Subject: "meds", Value: "Warfarin 7mg daily"}, ActionFlag)
	if p.New.Pending != ActionSupersede || p.New.Supersedes != 1 {
		t.Fatalf("effective replacement not gated: %+v, want pending %s superseding #1", p.New, ActionSupersede)
	}
	// On a single-valued confirm slot, any different value is a replacement.
	e.mustWrite(Input{Subject: "code_status", Value: "full code", Kind: KindEvent}, ActionAdd)
	p = e.mustWrite(Input{Subject: "code_status", Value: "DNR", Kind: KindEvent}, ActionFlag)
	if p.New.Pending != ActionSupersede {
		t.Fatalf("event on a single-valued confirm slot: %+v, want pending %s", p.New, ActionSupersede)
	}
	// A low-confidence change to a confirm slot is held as a proposal too
	// (the confirm gate comes first).
	p = e.mustWrite(Input{Subject: "code_status", Value: "DNI", Confidence: 0.3}, ActionFlag)
	if !p.New.Gated() {
		t.Fatalf("held = %q, want the confirm gate", p.New.Held)
	}
	if got := e.activeValues("active_medication"); len(got) != 1 || got[0] != "warfarin 5mg daily" {
		t.Fatalf("active = %q, want only %q", got, "warfarin 5mg daily")
	}
}

func BenchmarkRecall10k(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "m.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	o := Options{}.WithDefaults()
	sp := Space{UserID: "agent_1"}
	err = db.Update(context.Background(), func(tx kv.Tx) error {
		for i := range 10000 {
			in := Input{Op: OpRemember, Subject: fmt.Sprintf("subject_%d", i), Value: fmt.Sprintf("value number %d of the benchmark", i), Confidence: 0.95, Kind: KindState}
			if _, err := o.Write(tx, sp, in, t0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		err := db.View(context.Background(), func(tx kv.Tx) error {
			r, err := RecallSpace(tx, sp, RecallRequest{Question: "what is subject 42?", Context: 40, Budget: 200})
			if err == nil && len(r.Facts) == 0 {
				b.Fatal("RecallSpace found no facts, want some")
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
