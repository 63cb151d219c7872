package memorytools

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

var t0 = time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC)

// fixture is a bot on a real bbolt file with the memory tools, a settable
// clock and one caller per role.
type fixture struct {
	t      *testing.T
	b      *bot.Bot
	db     *bolt.DB
	mu     sync.Mutex
	now    time.Time
	agent  *bot.Caller
	member *bot.Caller
	nurse  *bot.Caller // a second member
	admin  *bot.Caller
	fhir   *bot.Caller
}

func newFixture(t *testing.T, o memory.Options) *fixture {
	t.Helper()
	db := bottest.OpenStore(t)
	f := &fixture{t: t, db: db, now: t0}
	// MaxOpenItems: the sweep tests keep more proposals of one agent open
	// than the default quota allows (the quota's own tests are bot's).
	f.b = testbot.New(t, bot.Options{Store: kvtest.Twice(db), Now: f.clock, Sinks: []string{"slack"}, MaxOpenItems: 1000})
	var err error
	if o.Schema == nil {
		o.Schema, err = memory.NewSchema([]memory.Slot{
			{Name: "active_medication", Category: "active_medication", Verbatim: true, Multi: true, Confirm: true, Aliases: []string{"meds"}, Channel: "pharmacy", Sensitive: true},
			{Name: "allergy", Category: "allergy", Verbatim: true, Multi: true},
			{Name: "code_status", Category: "code_status", Confirm: true},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if o.TrustedSources == nil {
		o.TrustedSources = []string{"fhir"}
	}
	if o.CriticalCategories == nil {
		o.CriticalCategories = []string{"allergy", "active_medication"}
	}
	if err := Register(f.b, o); err != nil {
		t.Fatal(err)
	}
	mk := func(id, name string, role policy.Role, kind string) *bot.Caller {
		return &bot.Caller{Principal: bot.Principal{ID: id, Name: name, Role: role, Kind: kind}, Surface: "test"}
	}
	f.agent = mk("prin_agent", "ward_bot", policy.RoleAgent, "agent")
	f.member = mk("prin_member", "dr_smith", policy.RoleMember, "person")
	f.nurse = mk("prin_nurse", "nurse_jo", policy.RoleMember, "person")
	f.admin = mk("prin_admin", "ops", policy.RoleAdmin, "person")
	f.fhir = mk("prin_fhir", "fhir", policy.RoleAgent, "service")
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// call runs a tool with args marshalled from a map (or a raw JSON string).
func (f *fixture) call(c *bot.Caller, tool string, args any) (bot.Result, error) {
	f.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			f.t.Fatal(err)
		}
		raw = string(b)
	}
	return f.b.Call(context.Background(), c, tool, []byte(raw))
}

func (f *fixture) ok(c *bot.Caller, tool string, args any) bot.Result {
	f.t.Helper()
	r, err := f.call(c, tool, args)
	if err != nil {
		f.t.Fatalf("%s %v: %v", tool, args, err)
	}
	return r
}

func (f *fixture) text(c *bot.Caller, tool string, args any, want string) bot.Result {
	f.t.Helper()
	r := f.ok(c, tool, args)
	if r.Text != want {
		f.t.Fatalf("%s %v:\n got: %s\nwant: %s", tool, args, r.Text, want)
	}
	return r
}

func (f *fixture) fail(c *bot.Caller, tool string, args any, kind bot.Kind) *bot.Error {
	f.t.Helper()
	_, err := f.call(c, tool, args)
	var be *bot.Error
	if !errors.As(err, &be) || be.Kind != kind {
		f.t.Fatalf("%s %v: err = %v, want kind %d", tool, args, err, kind)
	}
	return be
}

// audit returns every audit entry.
func (f *fixture) audit() []approvals.Entry {
	f.t.Helper()
	var out []approvals.Entry
	err := f.db.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			e, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) lastAudit() approvals.Entry {
	a := f.audit()
	if len(a) == 0 {
		f.t.Fatal("no audit entries")
	}
	return a[len(a)-1]
}

func (f *fixture) outbox() []bot.Event {
	f.t.Helper()
	ev, err := f.b.Outbox().Due(context.Background(), "slack", f.clock().Add(time.Hour), 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return ev
}

const p42 = "patient_42"

func arg(kv ...any) map[string]any {
	m := map[string]any{"user_id": p42}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// seed plays the seed scenario up to the two proposals.
func (f *fixture) seed() {
	f.t.Helper()
	f.text(f.fhir, "remember", arg("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir"), "Stored: [ADD] active_medication = warfarin 5mg daily")
	f.text(f.agent, "remember", arg("subject", "meds", "value", "apixaban 5mg twice daily", "replaces", "warfarin", "text", "Switch her to apixaban 5mg twice daily."), "Stored: [FLAG] active_medication = apixaban 5mg twice daily")
	f.text(f.agent, "forget", arg("subject", "active_medication", "value", "warfarin", "text", "Maybe stop the warfarin."), "Stored: [FLAG] active_medication = warfarin 5mg daily")
}

const seedPending = "2 change(s) awaiting approval:\n" +
	"  #2 REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'\n" +
	"        said: 'Switch her to apixaban 5mg twice daily.'\n" +
	"  #3 REMOVE active_medication: 'warfarin 5mg daily'\n" +
	"        said: 'Maybe stop the warfarin.'\n\n" +
	"Approve with confirm_change(memory_id), discard with reject_change(memory_id)."

const notAwaiting2 = "#2 is not awaiting approval. It may have been decided already, or the value it would have replaced has since changed — in which case the proposal is stale and should be re-made against the current value."

func TestSeedScenario(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.seed()
	r := f.text(f.agent, "pending_changes", arg(), seedPending)
	if d := r.Data.(map[string]any); d["count"] != 2 {
		t.Fatalf("pending data: %+v, want count 2", d)
	}
	r = f.text(f.agent, "check_before_act", arg("subject", "active_medication"),
		"⛔ BLOCKED — do NOT act on 'active_medication':\n  • unresolved conflict (FLAGGED) — the value is disputed")
	vd := r.Data.(verdictData)
	if vd.Verdict != policy.VerdictBlocked || !reflect.DeepEqual(vd.Reasons, []string{policy.ReasonFlagged}) || len(vd.Facts) != 3 {
		t.Fatalf("verdict data: %+v; want %v for %v only, with 3 facts", vd, policy.VerdictBlocked, []string{policy.ReasonFlagged})
	}
	if a := f.lastAudit(); a.Action != "check_before_act" || a.Detail != "active_medication: BLOCKED" || a.Principal != "ward_bot [prin_agent]" || a.UserID != p42 {
		t.Fatalf("audit: %+v; want check_before_act %q by %q in %s", a, "active_medication: BLOCKED", "ward_bot [prin_agent]", p42)
	}

	// The agent cannot approve; the member can.
	e := f.fail(f.agent, "confirm_change", arg("memory_id", 2), bot.KindDenied)
	if e.Msg != "Access denied: 'confirm_change' requires the 'approve' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("deny: %q, want %q", e.Msg, "Access denied: 'confirm_change' requires the 'approve' capability; your role(s) ['agent'] do not grant it.")
	}
	f.text(f.member, "confirm_change", arg("memory_id", 2, "decided_by", "dr_smith", "reason", "switch per cardiology"), "Approved #2: SUPERSEDE active_medication = apixaban 5mg twice daily")
	if a := f.lastAudit(); a.Action != "confirm_change" || !strings.HasPrefix(a.Detail, "#2 SUPERSEDE active_medication by dr_smith [prin_member]") || !strings.Contains(a.Detail, "switch per cardiology") {
		t.Fatalf("confirm audit: %+v; want confirm_change starting %q, with %q", a, "#2 SUPERSEDE active_medication by dr_smith [prin_member]", "switch per cardiology")
	}
	// A target-changed proposal may still be discarded.
	f.text(f.member, "reject_change", arg("memory_id", 3), "Discarded #3. The current value is unchanged.")
	if a := f.lastAudit(); a.Detail != "#3 REJECT REMOVE active_medication by dr_smith [prin_member]" {
		t.Fatalf("reject audit: %q, want %q", a.Detail, "#3 REJECT REMOVE active_medication by dr_smith [prin_member]")
	}
	e = f.fail(f.member, "confirm_change", arg("memory_id", 2), bot.KindConflict)
	if e.Msg != notAwaiting2 {
		t.Fatalf("second confirm: %q, want %q", e.Msg, notAwaiting2)
	}
	if e := f.fail(f.member, "reject_change", arg("memory_id", 3), bot.KindConflict); e.Msg != "#3 is not awaiting approval." {
		t.Fatalf("second reject: %q, want %q", e.Msg, "#3 is not awaiting approval.")
	}
	f.text(f.agent, "pending_changes", arg(), "No changes awaiting approval.")
	f.text(f.agent, "check_before_act", arg("subject", "active_medication"), "✅ SAFE to act on 'active_medication'.\n  current: active_medication = apixaban 5mg twice daily")
	f.text(f.agent, "history", arg("subject", "active_medication"), "History for 'active_medication' (oldest → newest):\n"+
		"  1. warfarin 5mg daily  [SUPERSEDED]\n  2. apixaban 5mg twice daily  [ACTIVE]\n  3. warfarin 5mg daily  [HISTORICAL]")

	// Chat items: one per proposal, created then decided, in the outbox.
	var types []string
	for _, ev := range f.outbox() {
		types = append(types, ev.Type)
	}
	if want := []string{"created", "created", "decided", "decided"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("outbox = %v, want %v", types, want)
	}
}

func TestItemSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{ProposalMaxAge: 24 * time.Hour})
	f.seed()
	r := f.ok(f.agent, "pending_changes", arg())
	ch := r.Data.(map[string]any)["changes"].([]pendingData)
	it, err := f.b.Items().Get(context.Background(), ch[0].ItemID)
	if err != nil {
		t.Fatal(err)
	}
	if it.Title != "patient_42's active_medication: warfarin 5mg daily → apixaban 5mg twice daily" || it.Status != "pending" ||
		it.Requester != "ward_bot [prin_agent]" || !it.Sensitive || it.Channel != "pharmacy" || it.Kind != bot.KindMemoryChange ||
		!it.ExpiresAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("item: %+v; want %q, a pending sensitive memory change by %q in %q, expiring at %v", it, "patient_42's active_medication: warfarin 5mg daily → apixaban 5mg twice daily", "ward_bot [prin_agent]", "pharmacy", t0.Add(24*time.Hour))
	}
	// What approving does, computed from the proposal, not its words.
	if want := "apixaban 5mg twice daily becomes patient_42's active_medication for every agent, replacing warfarin 5mg daily; nothing is ordered or run."; it.Effect != want {
		t.Errorf("effect %q\nwant   %q", it.Effect, want)
	}
	if want := "Every change to active_medication waits for a person: it is a confirm slot of the slot schema."; it.Asked != want {
		t.Errorf("asked %q, want %q", it.Asked, want)
	}
	want := map[string]string{"Current value": "warfarin 5mg daily",
		"Proposed value": "apixaban 5mg twice daily", "Said": "Switch her to apixaban 5mg twice daily.", "Confidence": "0.95"}
	// The developer's detail is folded: the space's key, the principal
	// ids, the seed's change line.
	wantDetails := map[string]string{"Space": "patient_42", // a label for people, not the key form "patient_42//"
		"Subject": "active_medication", "Proposed by": "ward_bot [prin_agent]",
		"Change": "REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'"}
	for _, fl := range it.Details {
		if w, ok := wantDetails[fl.Label]; ok && w != fl.Value {
			t.Errorf("detail %s = %q, want %q", fl.Label, fl.Value, w)
		}
		delete(wantDetails, fl.Label)
	}
	if len(wantDetails) != 0 {
		t.Errorf("missing details %v, want every one shown", wantDetails)
	}
	for _, fl := range it.Fields {
		if w, ok := want[fl.Label]; ok && w != fl.Value {
			t.Errorf("field %s = %q, want %q", fl.Label, fl.Value, w)
		}
		delete(want, fl.Label)
	}
	if len(want) != 0 {
		t.Errorf("missing fields %v, want every one shown", want)
	}
	rem, err := f.b.Items().Get(context.Background(), ch[1].ItemID)
	if err != nil || rem.Title != "Remove warfarin 5mg daily from patient_42's active_medication" ||
		rem.Effect != "warfarin 5mg daily is removed from patient_42's active_medication for every agent; nothing is ordered or run." {
		t.Fatalf("remove item: %+v %v; want title %q", rem, err, "Remove warfarin 5mg daily from patient_42's active_medication")
	}

	// A chat decision takes the same path: the agent is refused, the member decides.
	if _, err := f.b.DecideItem(context.Background(), f.agent, it.ID, true, "", nil); bot.KindOf(err) != bot.KindDenied {
		t.Fatalf("agent decision from chat: %v, want a KindDenied error", err)
	}
	res, err := f.b.DecideItem(context.Background(), f.member, rem.ID, false, "not now", nil)
	if err != nil || res.Text != "Discarded #3. The current value is unchanged." {
		t.Fatalf("chat reject: %+v %v; want %q", res, err, "Discarded #3. The current value is unchanged.")
	}
	rem, _ = f.b.Items().Get(context.Background(), rem.ID)
	if rem.Status != "rejected" || !reflect.DeepEqual(rem.DecidedBy, []string{"dr_smith [prin_member]"}) || rem.Reason != "not now" {
		t.Fatalf("decided item: %+v; want rejected by dr_smith [prin_member], reason %q", rem, "not now")
	}
}

func TestStaleProposalIsClosedWhenConfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.seed()
	// The trusted feed changes warfarin directly: both proposals go stale.
	f.text(f.fhir, "remember", arg("subject", "active_medication", "value", "warfarin 7mg daily", "source", "fhir"), "Stored: [SUPERSEDE] active_medication = warfarin 7mg daily")
	e := f.fail(f.member, "confirm_change", arg("memory_id", 2), bot.KindConflict)
	if e.Msg != notAwaiting2 {
		t.Fatalf("stale confirm: %q, want %q", e.Msg, notAwaiting2)
	}
	// Closed in the same call: gone from the queue, audited, item decided.
	r := f.ok(f.agent, "pending_changes", arg())
	// #3 is stale too: listed apart with the value it expected, never as
	// "(unknown)" awaiting approval (issue 14 item 10).
	if !strings.HasPrefix(r.Text, "No changes awaiting approval.\n\n1 stale proposal(s): the value each was proposed against is no longer current, so it can no longer be approved; the sweeper closes it (or discard it now with reject_change):\n  #3 REMOVE active_medication: 'warfarin 5mg daily' (no longer current: STALE)") {
		t.Fatalf("pending after stale confirm:\n%s\nwant it to start with:\n%s", r.Text, "No changes awaiting approval.\n\n1 stale proposal(s): the value each was proposed against is no longer current, so it can no longer be approved; the sweeper closes it (or discard it now with reject_change):\n  #3 REMOVE active_medication: 'warfarin 5mg daily' (no longer current: STALE)")
	}
	if ch := r.Data.(map[string]any)["changes"].([]pendingData); len(ch) != 1 || !ch[0].Stale || ch[0].Current != "warfarin 5mg daily" {
		t.Fatalf("pending data after stale confirm: %+v; want one, stale, against %q", ch, "warfarin 5mg daily")
	}
	if a := f.lastAudit(); a.Action != "confirm_change" || !strings.HasPrefix(a.Detail, "#2 STALE active_medication: #1 is now SUPERSEDED") {
		t.Fatalf("stale audit: %+v; want confirm_change starting %q", a, "#2 STALE active_medication: #1 is now SUPERSEDED")
	}
	g := f.ok(f.agent, "get_memory", arg("memory_id", 2))
	if fd := g.Data.(factData); fd.Status != memory.StatusHistorical || fd.Proposal.Status != "stale" {
		t.Fatalf("#2: %+v; want %v with a stale proposal", g.Data, memory.StatusHistorical)
	}
	// The sweep closes the other one, as the system.
	rep, err := f.b.Sweep(context.Background(), f.clock())
	if err != nil || rep["memory"] != 1 {
		t.Fatalf("sweep: %v %v; want memory 1", rep, err)
	}
	if a := f.lastAudit(); a.Action != "memory_sweep" || a.Principal != "countersign [system]" || a.UserID != p42 || !strings.HasPrefix(a.Detail, "#3 STALE") {
		t.Fatalf("sweep audit: %+v; want memory_sweep by %q in %s, starting %q", a, "countersign [system]", p42, "#3 STALE")
	}
	f.text(f.agent, "pending_changes", arg(), "No changes awaiting approval.")
	decidedEvents := 0
	for _, ev := range f.outbox() {
		if ev.Type == bot.EventDecided {
			decidedEvents++
		}
	}
	if decidedEvents != 2 {
		t.Fatalf("decided events = %d, want 2", decidedEvents)
	}
}

func TestSweepExpiresInBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{ProposalMaxAge: time.Hour})
	f.ok(f.fhir, "remember", arg("subject", "code_status", "value", "full code", "source", "fhir"))
	const n = 300 // more than one sweep batch closes
	for i := range n {
		f.ok(f.agent, "remember", arg("subject", "code_status", "value", "option "+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	if rep, err := f.b.Sweep(context.Background(), t0.Add(59*time.Minute)); err != nil || rep["memory"] != 0 {
		t.Fatalf("early sweep: %v %v; want memory 0", rep, err)
	}
	rep, err := f.b.Sweep(context.Background(), t0.Add(time.Hour))
	if err != nil || rep["memory"] != n {
		t.Fatalf("sweep: %v %v; want memory %d", rep, err, n)
	}
	f.text(f.agent, "pending_changes", arg(), "No changes awaiting approval.")
	// An expired proposal can no longer be confirmed.
	f.fail(f.member, "confirm_change", arg("memory_id", 2), bot.KindConflict)
}

func TestExpiredProposalRefusedAtConfirm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{ProposalMaxAge: time.Hour})
	f.seed()
	f.advance(2 * time.Hour)
	f.fail(f.member, "confirm_change", arg("memory_id", 2), bot.KindConflict)
	g := f.ok(f.agent, "get_memory", arg("memory_id", 2))
	if fd := g.Data.(factData); fd.Proposal.Status != "expired" {
		t.Fatalf("#2: %+v, want an expired proposal", fd.Proposal)
	}
}

func TestProposerCannotConfirmOwnProposal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.ok(f.fhir, "remember", arg("subject", "code_status", "value", "full code", "source", "fhir"))
	f.text(f.member, "remember", arg("subject", "code_status", "value", "DNR"), "Stored: [FLAG] code_status = DNR")
	e := f.fail(f.member, "confirm_change", arg("memory_id", 2), bot.KindDenied)
	if !strings.Contains(e.Msg, "#2 was requested by dr_smith [prin_member], and a request is never decided by its own requester") {
		t.Fatalf("self-approval: %q, want it to contain %q", e.Msg, "#2 was requested by dr_smith [prin_member], and a request is never decided by its own requester")
	}
	if a := f.lastAudit(); a.Action != "access_denied" {
		t.Fatalf("self-approval not audited: %+v, want access_denied", a)
	}
	f.text(f.nurse, "confirm_change", arg("memory_id", 2), "Approved #2: SUPERSEDE code_status = DNR")
}

func TestTrustedSourceIsBoundToItsKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	other := &bot.Caller{Principal: bot.Principal{ID: "prin_other", Name: "other", Role: policy.RoleAgent}}
	e := f.fail(other, "remember", arg("subject", "allergy", "value", "penicillin", "source", "FHIR"), bot.KindDenied)
	if e.Msg != "Access denied: 'FHIR' is a trusted source (trusted_sources), so its changes skip the confirmation gate. Only a key named 'FHIR', or a person with the 'approve' capability, may write as it." {
		t.Fatalf("deny: %q, want %q", e.Msg, "Access denied: 'FHIR' is a trusted source (trusted_sources), so its changes skip the confirmation gate. Only a key named 'FHIR', or a person with the 'approve' capability, may write as it.")
	}
	if a := f.lastAudit(); a.Action != "access_denied" || !strings.HasPrefix(a.Detail, "remember: Access denied: 'FHIR' is a trusted source") {
		t.Fatalf("audit: %+v; want access_denied starting %q", a, "remember: Access denied: 'FHIR' is a trusted source")
	}
	f.fail(other, "forget", arg("subject", "allergy", "source", "fhir"), bot.KindDenied)
	f.text(f.fhir, "remember", arg("subject", "allergy", "value", "penicillin", "source", "fhir"), "Stored: [ADD] allergy = penicillin")
	// A caller holding approve may write as it, and so skips the gate.
	f.ok(f.fhir, "remember", arg("subject", "code_status", "value", "full code", "source", "fhir"))
	f.text(f.member, "remember", arg("subject", "code_status", "value", "DNR", "source", "fhir"), "Stored: [SUPERSEDE] code_status = DNR")
	// An untrusted source is a free string.
	f.text(other, "remember", arg("subject", "note", "value", "x", "source", "crm"), "Stored: [ADD] note = x")
}

func TestUpdateMemory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.ok(f.agent, "remember", arg("subject", "platform_lead", "value", "Alice", "metadata", map[string]any{"team": "eng"}))
	f.text(f.agent, "update_memory", arg("memory_id", 1, "new_value", "Carol"), "Updated #1: 'Alice' → 'Carol' (now #2; old kept in history).")
	f.text(f.agent, "update_memory", arg("memory_id", 2, "new_value", "carol"), "No change: #2 already holds 'Carol'.")
	if e := f.fail(f.agent, "update_memory", arg("memory_id", 1, "new_value", "Bob"), bot.KindConflict); !strings.Contains(e.Msg, "#1 is not a current value") {
		t.Fatalf("edit retired: %q, want it to contain %q", e.Msg, "#1 is not a current value")
	}
	if e := f.fail(f.agent, "update_memory", arg("memory_id", 99, "new_value", "Bob"), bot.KindNotFound); e.Msg != "No memory with id #99." {
		t.Fatalf("edit unknown: %q, want %q", e.Msg, "No memory with id #99.")
	}
	g := f.ok(f.agent, "get_memory", arg("memory_id", 2))
	if !strings.HasPrefix(g.Text, "#2  platform_lead = Carol\n  status=ACTIVE  scope=global  confidence=0.95  metadata={'team': 'eng'}") {
		t.Fatalf("get_memory:\n%s\nwant it to start with:\n%s", g.Text, "#2  platform_lead = Carol\n  status=ACTIVE  scope=global  confidence=0.95  metadata={'team': 'eng'}")
	}

	// On a confirm slot: the agent proposes, an approver applies.
	f.ok(f.fhir, "remember", arg("subject", "code_status", "value", "full code", "source", "fhir")) // #3
	f.text(f.agent, "update_memory", arg("memory_id", 3, "new_value", "DNR"),
		"Queued #4 for approval: 'full code' → 'DNR'. The current value stands until someone confirms it (code_status is a confirm slot).")
	f.text(f.agent, "update_memory", arg("memory_id", 3, "new_value", "DNR"), "Already awaiting approval as #4: 'full code' → 'DNR'.")
	f.text(f.member, "update_memory", arg("memory_id", 3, "new_value", "DNI"), "Updated #3: 'full code' → 'DNI' (now #5; old kept in history).")
	if a := f.lastAudit(); a.Principal != "dr_smith [prin_member]" || a.Detail != "#3 -> #5 code_status: 'full code' -> 'DNI'" {
		t.Fatalf("edit audit: %+v; want %q by %q", a, "#3 -> #5 code_status: 'full code' -> 'DNI'", "dr_smith [prin_member]")
	}
	// The agent's proposal went stale with it.
	f.fail(f.member, "confirm_change", arg("memory_id", 4), bot.KindConflict)
}

func TestCheckBeforeActWindows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Redux"))
	f.advance(100 * 24 * time.Hour)
	f.text(f.agent, "check_before_act", arg("subject", "state", "max_staleness_days", 90),
		"⛔ BLOCKED — do NOT act on 'state':\n  • stale: last set 100d ago > 90d limit")
	f.text(f.agent, "check_before_act", arg("subject", "state", "max_staleness_days", 0), "✅ SAFE to act on 'state'.\n  current: state = Redux")
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Zustand"))
	f.text(f.agent, "check_before_act", arg("subject", "state", "block_on_recent_change_days", 1),
		"⛔ BLOCKED — do NOT act on 'state':\n  • recently changed 0.0d ago — may be unsettled")
	f.advance(12 * time.Hour)
	f.text(f.agent, "check_before_act", arg("subject", "state", "block_on_recent_change_days", 1),
		"⛔ BLOCKED — do NOT act on 'state':\n  • recently changed 0.5d ago — may be unsettled")
	f.advance(13 * time.Hour)
	f.text(f.agent, "check_before_act", arg("subject", "State", "block_on_recent_change_days", 1), "✅ SAFE to act on 'state'.\n  current: state = Zustand")
	f.ok(f.agent, "remember", arg("subject", "api_timeout", "value", "30s", "confidence", 0.5))
	f.text(f.agent, "check_before_act", arg("subject", "api_timeout"), "⛔ BLOCKED — do NOT act on 'api_timeout':\n  • confidence 0.5 < required 0.7")
	r := f.text(f.agent, "check_before_act", arg("subject", "nope"), "⛔ BLOCKED — do NOT act on 'nope':\n  • no active fact for this subject — nothing safe to act on")
	if d := r.Data.(verdictData); d.Verdict != policy.VerdictBlocked || len(d.Reasons) != 1 {
		t.Fatalf("data: %+v; want %v with one reason", d, policy.VerdictBlocked)
	}
	r = f.ok(f.agent, "check_before_act", arg("subject", "api_timeout", "min_confidence", 0.4))
	if d := r.Data.(verdictData); d.Verdict != policy.VerdictSafe || d.Reasons == nil || len(d.Reasons) != 0 {
		t.Fatalf("safe data: %+v; want %v with an empty, non-nil reason list", d, policy.VerdictSafe)
	}
}

func TestRecallAndSafeRecall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{CriticalBudget: 2})
	f.ok(f.fhir, "remember", arg("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir"))
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Redux"))
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Zustand", "source", "crm"))
	r := f.text(f.agent, "recall", arg("question", "which state library?"), "Based on these facts:\n"+
		"  • #3 state = Zustand  [conf 0.95, from crm, supersedes #2]\n"+
		"  • #1 active_medication = warfarin 5mg daily  [conf 0.95, from fhir]")
	if a := f.lastAudit(); a.Action != "recall" || a.Detail != "which state library?" {
		t.Fatalf("recall audit: %+v; want recall %q", a, "which state library?")
	}
	_ = r
	f.text(f.agent, "safe_recall", arg("question", "which state library?"), "Based on these facts:\n"+
		"  • #3 state = Zustand  [conf 0.95, from crm, supersedes #2]\n"+
		"  • #1 active_medication = warfarin 5mg daily  [conf 0.95, from fhir]")
	if a := f.lastAudit(); a.Action != "safe_recall" || a.Detail != "which state library?: ANSWERED" {
		t.Fatalf("safe_recall audit: %+v; want safe_recall %q", a, "which state library?: ANSWERED")
	}

	// One low-confidence fact anywhere in a small space withholds every answer.
	f.ok(f.agent, "remember", arg("subject", "api_timeout", "value", "30s", "confidence", 0.5))
	sr := f.text(f.agent, "safe_recall", arg("question", "which state library?"), "⛔ WITHHELD — not safe to act on this answer:\n  • confidence 0.5 < required 0.7")
	if d := sr.Data.(safeRecallData); d.Verdict != policy.VerdictWithheld || len(d.Facts) != 3 {
		t.Fatalf("withheld data: %+v; want %v with 3 facts", d, policy.VerdictWithheld)
	}
	if a := f.lastAudit(); a.Detail != "which state library?: WITHHELD" {
		t.Fatalf("withheld audit: %q, want %q", a.Detail, "which state library?: WITHHELD")
	}
	// A pending proposal on a subject in context: disputed.
	f.ok(f.agent, "remember", arg("subject", "active_medication", "value", "warfarin 7mg daily"))
	f.text(f.agent, "safe_recall", arg("question", "warfarin dose?", "min_confidence", 0.4), "⛔ WITHHELD — not safe to act on this answer:\n  • unresolved conflict on 'active_medication' — the value is disputed")

	// An empty space: nothing supports the answer.
	f.text(f.agent, "safe_recall", map[string]any{"user_id": "empty", "question": "anything?"}, "⛔ WITHHELD — not safe to act on this answer:\n  • no current fact supports this — nothing safe to act on")
	f.text(f.agent, "recall", map[string]any{"user_id": "empty", "question": "anything?"}, memory.NoFactsUsed)

	// Over the critical budget (2): the read fails, saying nothing was dropped.
	f.ok(f.agent, "remember", arg("subject", "allergy", "value", "penicillin"))
	f.ok(f.agent, "remember", arg("subject", "allergy", "value", "latex"))
	e := f.fail(f.agent, "recall", arg("question", "allergies?"), bot.KindConflict)
	if !strings.Contains(e.Msg, "Nothing was dropped") || !strings.Contains(e.Msg, "critical_budget") {
		t.Fatalf("overflow: %q, want it to contain %q and %q", e.Msg, "Nothing was dropped", "critical_budget")
	}
	if a := f.lastAudit(); a.Detail != "allergies?: REFUSED (critical overflow)" {
		t.Fatalf("overflow audit: %q, want %q", a.Detail, "allergies?: REFUSED (critical overflow)")
	}
	f.fail(f.agent, "safe_recall", arg("question", "allergies?"), bot.KindConflict)
}

func TestRecallCriticalCategoriesPerCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{RecallContext: 1, CriticalCategories: []string{}})
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Zustand"))
	f.ok(f.agent, "remember", arg("subject", "hosting", "value", "Fly.io"))
	f.ok(f.agent, "remember", arg("subject", "diet", "value", "vegan", "metadata", map[string]any{"category": "Dietary"}))
	r := f.ok(f.agent, "recall", arg("question", "state?"))
	if got := len(r.Data.(recallData).Facts); got != 1 {
		t.Fatalf("ranked facts = %d, want 1", got)
	}
	r = f.ok(f.agent, "recall", arg("question", "state?", "critical_categories", " dietary , other"))
	d := r.Data.(recallData)
	if len(d.Facts) != 2 || d.Facts[1].Value != "vegan" || !d.Facts[1].Critical {
		t.Fatalf("with per-call critical: %+v; want 2 facts, the second %q and critical", d.Facts, "vegan")
	}
}

// Seed 000: recall("summarise the chart", critical_categories="allergy")
// is a "per-call override": the call's set replaces the configured one, and
// an explicit empty value means none for this call.
func TestRecallPerCallCriticalCategoriesOverrideTheConfiguredSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{RecallContext: 1, CriticalCategories: []string{"active_medication"}})
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Zustand"))
	f.ok(f.agent, "remember", arg("subject", "drug", "value", "warfarin 5mg daily", "metadata", map[string]any{"category": "active_medication"}))
	f.ok(f.agent, "remember", arg("subject", "reaction", "value", "penicillin", "metadata", map[string]any{"category": "allergy"}))
	critical := func(r bot.Result) []string {
		var out []string
		for _, fa := range r.Data.(recallData).Facts {
			if fa.Critical {
				out = append(out, fa.Value)
			}
		}
		return out
	}
	if got := critical(f.ok(f.agent, "recall", arg("question", "state?"))); !slices.Equal(got, []string{"warfarin 5mg daily"}) {
		t.Fatalf("configured set: critical = %v, want [warfarin 5mg daily]", got)
	}
	if got := critical(f.ok(f.agent, "recall", arg("question", "summarise the chart", "critical_categories", "allergy"))); !slices.Equal(got, []string{"penicillin"}) {
		t.Fatalf("critical_categories=allergy replaces the configured set: critical = %v, want [penicillin]", got)
	}
	if got := critical(f.ok(f.agent, "recall", arg("question", "state?", "critical_categories", ""))); len(got) != 0 {
		t.Fatalf("an explicit empty critical_categories means none: critical = %v, want none", got)
	}
}

func TestReconcilePolicyTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	org := func(kv ...any) map[string]any { m := arg(kv...); m["user_id"] = "org:acme"; return m }
	f.text(f.agent, "get_reconcile_policy", org(), "Policy: RECENCY (default — newer assertion wins).")
	f.fail(f.member, "set_reconcile_policy", org("mode", "REVIEW"), bot.KindDenied)
	e := f.fail(f.admin, "set_reconcile_policy", org("mode", "VOTE"), bot.KindInvalid)
	if e.Msg != "Unknown mode 'VOTE'. Use RECENCY, AUTHORITY, or REVIEW." || e.Field != "mode" {
		t.Fatalf("VOTE: %+v; want %q on field mode", e, "Unknown mode 'VOTE'. Use RECENCY, AUTHORITY, or REVIEW.")
	}
	f.text(f.admin, "set_reconcile_policy", org("mode", "authority", "authority", map[string]int{"agent": 1, "fhir": 10}),
		"Reconciliation policy for this space set to AUTHORITY.  authority ranks: {'fhir': 10, 'agent': 1}")
	if a := f.lastAudit(); a.Action != "set_reconcile_policy" || a.Detail != "mode=AUTHORITY authority={'fhir': 10, 'agent': 1}" {
		t.Fatalf("audit: %+v; want set_reconcile_policy %q", a, "mode=AUTHORITY authority={'fhir': 10, 'agent': 1}")
	}
	f.text(f.agent, "get_reconcile_policy", org(), "Policy: AUTHORITY\n  authority ranks: {'fhir': 10, 'agent': 1}")
	f.text(f.fhir, "remember", org("subject", "plan", "value", "Pro", "source", "fhir"), "Stored: [ADD] plan = Pro")
	f.text(f.agent, "remember", org("subject", "plan", "value", "Free", "source", "agent"), "Stored: [FLAG] plan = Free")
	r := f.ok(f.agent, "pending_changes", org())
	if !strings.Contains(r.Text, "#2 REPLACE plan: 'Pro' -> 'Free'\n        held: source 'agent' (rank 1) does not outrank 'fhir' (rank 10) under the AUTHORITY policy") {
		t.Fatalf("pending:\n%s\nwant it to contain:\n%s", r.Text, "#2 REPLACE plan: 'Pro' -> 'Free'\n        held: source 'agent' (rank 1) does not outrank 'fhir' (rank 10) under the AUTHORITY policy")
	}
	f.fail(f.admin, "set_reconcile_policy", org("authority", map[string]int{"a": 1, "A": 2}), bot.KindInvalid)
	f.text(f.admin, "set_reconcile_policy", org(), "Reconciliation policy for this space set to RECENCY.")
	f.text(f.agent, "get_reconcile_policy", org(), "Policy: RECENCY")
}

func TestListMemories(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.text(f.agent, "list_memories", arg(), "(no memories yet)")
	f.ok(f.agent, "remember", arg("subject", "monitoring", "value", "Sentry"))
	f.text(f.agent, "forget", arg("subject", "monitoring"), "Retracted (retained in history for audit): monitoring = Sentry")
	f.text(f.agent, "forget", arg("subject", "monitoring"), "Nothing matching to retract (that fact isn't currently stored).")
	f.ok(f.agent, "remember", arg("subject", "state", "value", "Zustand"))
	f.ok(f.agent, "remember", arg("subject", "hosting", "value", "Heroku"))
	f.ok(f.agent, "remember", arg("subject", "hosting", "value", "Fly.io", "time_ref", "future"))
	f.text(f.agent, "list_memories", arg(), "• state = Zustand  (#3)\n• hosting = Heroku  (#4)\n"+
		"⚠ hosting = Fly.io  (#5, flagged — needs confirmation)\n\n"+
		"— history (superseded / retracted / archived) —\n"+
		"  ◦ monitoring = (retracted: Sentry)  [HISTORICAL]\n  ◦ monitoring = Sentry  [SUPERSEDED]")
	f.text(f.agent, "history", arg("subject", "monitoring"), "History for 'monitoring' (oldest → newest):\n  1. Sentry  [SUPERSEDED]\n  2. (retracted: Sentry)  [HISTORICAL]")
	f.text(f.agent, "history", arg("subject", "nope"), "No history for 'nope'.")
	if e := f.fail(f.agent, "get_memory", arg("memory_id", 9999), bot.KindNotFound); e.Msg != "No memory with id #9999." {
		t.Fatalf("get unknown: %q, want %q", e.Msg, "No memory with id #9999.")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	long := strings.Repeat("x", 201)
	tests := []struct {
		tool  string
		args  any
		field string
	}{
		{"remember", `{"value": "x"}`, "subject"},
		{"remember", `{"subject": "x"}`, "value"},
		{"remember", `{"subject": "  ", "value": "x"}`, "subject"},
		{"remember", `{"subject": "x", "value": "   "}`, "value"},
		{"remember", map[string]any{"subject": long, "value": "x"}, "subject"},
		{"remember", map[string]any{"subject": "x", "value": strings.Repeat("v", 4001)}, "value"},
		{"remember", map[string]any{"subject": "x", "value": "y", "text": strings.Repeat("t", 4001)}, "text"},
		{"remember", `{"subject": "x", "value": "y", "confidence": "high"}`, "confidence"},
		{"remember", `{"subject": "x", "value": "y", "confidence": 1.5}`, "confidence"},
		{"remember", `{"subject": "x", "value": "y", "kind": "rumour"}`, "kind"},
		{"remember", `{"subject": "x", "value": "y", "time_ref": "yesterday"}`, "time_ref"},
		{"remember", `{"subject": "x", "value": "y", "metadata": {"category": 7}}`, "metadata"},
		{"remember", `{"subject": "x", "value": "y", "colour": "red"}`, "colour"},
		{"remember", `{"subject": "a\u0001b", "value": "y"}`, "subject"},
		{"remember", `{"subject": "x", "value": "y", "user_id": "a\u0001"}`, "user_id"},
		{"forget", `{}`, "subject"},
		{"update_memory", `{"memory_id": 0, "new_value": "x"}`, "memory_id"},
		{"update_memory", `{"memory_id": -1, "new_value": "x"}`, "memory_id"},
		{"update_memory", `{"memory_id": 1}`, "new_value"},
		{"confirm_change", `{"memory_id": "two"}`, "memory_id"},
		{"check_before_act", `{"subject": "x", "min_confidence": 2}`, "min_confidence"},
		{"recall", `{"question": ""}`, "question"},
		{"remember", `{"subject": "x", "value": "y", "replaces": "  "}`, "replaces"},
	}
	for _, tc := range tests {
		e := f.fail(f.member, tc.tool, tc.args, bot.KindInvalid)
		if e.Field != tc.field {
			t.Errorf("%s %v: field %q (%s), want %q", tc.tool, tc.args, e.Field, e.Msg, tc.field)
		}
	}
	f.fail(f.member, "remember", `{"subject": "x", "value": `, bot.KindInvalid)
	// A list slot with several items and no value: says which field fixes it.
	f.ok(f.fhir, "remember", arg("subject", "allergy", "value", "penicillin", "source", "fhir"))
	f.ok(f.fhir, "remember", arg("subject", "allergy", "value", "latex", "source", "fhir"))
	if e := f.fail(f.fhir, "forget", arg("subject", "allergy", "source", "fhir"), bot.KindInvalid); e.Field != "value" {
		t.Fatalf("ambiguous forget: %+v, want field %q", e, "value")
	}
	if e := f.fail(f.agent, "remember", arg("subject", "active_medication", "value", "heparin", "replaces", "insulin"), bot.KindConflict); !strings.Contains(e.Msg, "Nothing matching 'insulin' to replace") {
		t.Fatalf("replaces nothing: %q, want it to contain %q", e.Msg, "Nothing matching 'insulin' to replace")
	}
}

func TestScopesDenied(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	scoped := &bot.Caller{Principal: bot.Principal{ID: "prin_s", Name: "ward_bot", Role: policy.RoleAgent, Scopes: []string{p42}}}
	f.ok(scoped, "remember", arg("subject", "allergy", "value", "penicillin"))
	e := f.fail(scoped, "recall", map[string]any{"user_id": "patient_7", "question": "x"}, bot.KindDenied)
	if e.Msg != "Access denied: 'recall' targets a memory space outside your assigned scope." {
		t.Fatalf("scope: %q, want %q", e.Msg, "Access denied: 'recall' targets a memory space outside your assigned scope.")
	}
}

// TestDecisionRecordsWhatWasSeen: a memory decision taken from a card
// records what the decider was shown (seen) in its audit entry; a
// malformed seen is a 400 naming it.
func TestDecisionRecordsWhatWasSeen(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.seed()
	hash := strings.Repeat("ab", 32)
	if be := f.fail(f.member, "confirm_change", arg("memory_id", 2, "seen", map[string]any{"sha256": "nope", "surface": "slack"}), bot.KindInvalid); be.Field != "seen.sha256" {
		t.Fatalf("a malformed seen: %v (field %q), want field %q", be, be.Field, "seen.sha256")
	}
	f.ok(f.member, "confirm_change", arg("memory_id", 2, "seen", map[string]any{"sha256": hash, "surface": "slack"}))
	if d := f.lastAudit().Detail; !strings.Contains(d, "seen: slack card sha256 abababababababab… (whole) "+hash) {
		t.Fatalf("the confirm_change audit entry: %q, want it to contain %q", d, "seen: slack card sha256 abababababababab… (whole) "+hash)
	}
	f.ok(f.member, "reject_change", arg("memory_id", 3, "seen", map[string]any{"sha256": hash, "surface": "web", "truncated": true}))
	if d := f.lastAudit().Detail; !strings.Contains(d, "seen: web page sha256 abababababababab… (cut to fit) "+hash) {
		t.Fatalf("the reject_change audit entry: %q, want it to contain %q", d, "seen: web page sha256 abababababababab… (cut to fit) "+hash)
	}
}
