package main

import (
	"net/http"
	"reflect"
	"testing"
)

// memoryConfig declares the seed's active_medication slot and the fhir feed.
const memoryConfig = `
memory:
  slots:
    - name: active_medication
      category: active_medication
      verbatim: true
      multi: true
      confirm: true
      aliases: [meds]
  critical_categories: [active_medication]
  trusted_sources: [fhir]
`

func wantText(t *testing.T, r toolResponse, status int, text string) {
	t.Helper()
	if r.Status != status || r.Text != text {
		t.Fatalf("got %s\nwant %d %q", r, status, text)
	}
}

func TestMemoryE2E(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, memoryConfig)
	agent := e.CreateKey("ward_bot", "agent", "--scopes", "patient_42")
	member := e.CreateKey("dr_smith", "member")
	fhir := e.CreateKey("fhir", "agent")
	other := e.CreateKey("other", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()

	p42 := func(kv ...any) map[string]any {
		m := map[string]any{"user_id": "patient_42"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}

	// The trusted feed is bound to its key.
	r := e.Call(other, "remember", p42("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir"))
	const trustedDeny = "Access denied: 'fhir' is a trusted source (trusted_sources), so its changes skip the confirmation gate. Only a key named 'fhir', or a person with the 'approve' capability, may write as it."
	if r.Status != http.StatusForbidden || r.Error != trustedDeny || r.Text != trustedDeny {
		t.Fatalf("other writing as fhir: %s, want 403 %q", r, trustedDeny)
	}
	r = e.MustOK(fhir, "remember", p42("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir", "text", "Warfarin 5mg daily (FHIR MedicationStatement)."))
	wantText(t, r, 200, "Stored: [ADD] active_medication = warfarin 5mg daily")
	if r.Data["memory_id"] != float64(1) {
		t.Fatalf("first fact: %v, want memory_id 1", r.Data)
	}

	// The agent proposes a replacement and a removal: both held.
	r = e.MustOK(agent, "remember", p42("subject", "meds", "value", "apixaban 5mg twice daily", "replaces", "warfarin", "text", "Switch her to apixaban 5mg twice daily."))
	wantText(t, r, 200, "Stored: [FLAG] active_medication = apixaban 5mg twice daily")
	if r.Data["memory_id"] != float64(2) || r.Data["pending"] != true {
		t.Fatalf("replace proposal data: %v, want memory_id 2, pending", r.Data)
	}
	r = e.MustOK(agent, "forget", p42("subject", "active_medication", "value", "warfarin", "text", "Maybe stop the warfarin."))
	wantText(t, r, 200, "Stored: [FLAG] active_medication = warfarin 5mg daily")
	// Proposed twice, queued once.
	wantText(t, e.MustOK(agent, "forget", p42("subject", "active_medication", "value", "warfarin")), 200, "Stored: [DEDUP] active_medication = warfarin 5mg daily")

	wantText(t, e.MustOK(agent, "pending_changes", p42()), 200, "2 change(s) awaiting approval:\n"+
		"  #2 REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'\n"+
		"        said: 'Switch her to apixaban 5mg twice daily.'\n"+
		"  #3 REMOVE active_medication: 'warfarin 5mg daily'\n"+
		"        said: 'Maybe stop the warfarin.'\n\n"+
		"Approve with confirm_change(memory_id), discard with reject_change(memory_id).")

	// Blocked while a proposal is pending; the verdict is a 200 result.
	r = e.MustOK(agent, "check_before_act", p42("subject", "active_medication"))
	wantText(t, r, 200, "⛔ BLOCKED — do NOT act on 'active_medication':\n  • unresolved conflict (FLAGGED) — the value is disputed")
	if r.Data["verdict"] != "BLOCKED" || !reflect.DeepEqual(r.Data["reasons"], []any{"unresolved conflict (FLAGGED) — the value is disputed"}) {
		t.Fatalf("verdict data: %v, want verdict BLOCKED, reasons [%q]", r.Data, "unresolved conflict (FLAGGED) — the value is disputed")
	}
	r = e.MustOK(agent, "safe_recall", p42("question", "what anticoagulant is she on?"))
	wantText(t, r, 200, "⛔ WITHHELD — not safe to act on this answer:\n  • unresolved conflict on 'active_medication' — the value is disputed")
	if r.Data["verdict"] != "WITHHELD" {
		t.Fatalf("safe_recall data: %v, want verdict WITHHELD", r.Data)
	}

	// The agent key cannot approve.
	r = e.Call(agent, "confirm_change", p42("memory_id", 2))
	const agentDeny = "Access denied: 'confirm_change' requires the 'approve' capability; your role(s) ['agent'] do not grant it."
	if r.Status != http.StatusForbidden || r.Error != agentDeny || r.Text != agentDeny {
		t.Fatalf("agent confirm: %s, want 403 %q", r, agentDeny)
	}
	wantText(t, e.MustOK(member, "confirm_change", p42("memory_id", 2, "decided_by", "dr_smith")), 200, "Approved #2: SUPERSEDE active_medication = apixaban 5mg twice daily")
	wantText(t, e.MustOK(member, "reject_change", p42("memory_id", 3, "reason", "switched instead")), 200, "Discarded #3. The current value is unchanged.")
	r = e.MustOK(agent, "check_before_act", p42("subject", "active_medication"))
	wantText(t, r, 200, "✅ SAFE to act on 'active_medication'.\n  current: active_medication = apixaban 5mg twice daily")
	if r.Data["verdict"] != "SAFE" || !reflect.DeepEqual(r.Data["reasons"], []any{}) {
		t.Fatalf("safe data: %v, want verdict SAFE, reasons []", r.Data)
	}
	r = e.MustOK(agent, "safe_recall", p42("question", "what anticoagulant is she on?"))
	wantText(t, r, 200, "Based on these facts:\n  • #2 active_medication = apixaban 5mg twice daily  [conf 0.95, supersedes #1]")
	if r.Data["verdict"] != "ANSWERED" {
		t.Fatalf("answered data: %v, want verdict ANSWERED", r.Data)
	}

	// A stale proposal: the feed changes the value it targets; confirming
	// it is refused with 409 and it leaves the queue.
	wantText(t, e.MustOK(agent, "forget", p42("subject", "active_medication", "value", "apixaban", "text", "stop the apixaban")), 200, "Stored: [FLAG] active_medication = apixaban 5mg twice daily")
	wantText(t, e.MustOK(fhir, "remember", p42("subject", "active_medication", "value", "apixaban 2.5mg twice daily", "source", "fhir")), 200, "Stored: [SUPERSEDE] active_medication = apixaban 2.5mg twice daily")
	r = e.Call(member, "confirm_change", p42("memory_id", 4))
	const stale = "#4 is not awaiting approval. It may have been decided already, or the value it would have replaced has since changed — in which case the proposal is stale and should be re-made against the current value."
	if r.Status != http.StatusConflict || r.Text != stale || r.Error != stale {
		t.Fatalf("stale confirm: %s, want 409 %q", r, stale)
	}
	wantText(t, e.MustOK(agent, "pending_changes", p42()), 200, "No changes awaiting approval.")
	wantText(t, e.MustOK(agent, "history", p42("subject", "active_medication")), 200, "History for 'active_medication' (oldest → newest):\n"+
		"  1. warfarin 5mg daily  [SUPERSEDED]\n"+
		"  2. apixaban 5mg twice daily  [SUPERSEDED]\n"+
		"  3. warfarin 5mg daily  [HISTORICAL]\n"+
		"  4. apixaban 5mg twice daily  [HISTORICAL]\n"+
		"  5. apixaban 2.5mg twice daily  [ACTIVE]")

	// Scopes: the agent key is bound to patient_42.
	r = e.Call(agent, "remember", map[string]any{"user_id": "patient_7", "subject": "allergy", "value": "penicillin"})
	const scopeDeny = "Access denied: 'remember' targets a memory space outside your assigned scope."
	if r.Status != http.StatusForbidden || r.Error != scopeDeny || r.Text != scopeDeny {
		t.Fatalf("out of scope: %s, want 403 %q", r, scopeDeny)
	}

	// AUTHORITY: a lower-ranked source is flagged, not applied.
	org := func(kv ...any) map[string]any {
		m := p42(kv...)
		m["user_id"] = "org:acme"
		return m
	}
	r = e.Call(admin, "set_reconcile_policy", org("mode", "VOTE"))
	if r.Status != http.StatusBadRequest || r.Text != "Unknown mode 'VOTE'. Use RECENCY, AUTHORITY, or REVIEW." || r.Field != "mode" {
		t.Fatalf("VOTE: %s, want 400 on field mode, %q", r, "Unknown mode 'VOTE'. Use RECENCY, AUTHORITY, or REVIEW.")
	}
	if r := e.Call(member, "set_reconcile_policy", org("mode", "REVIEW")); r.Status != http.StatusForbidden {
		t.Fatalf("member sets policy: %s, want 403", r)
	}
	wantText(t, e.MustOK(member, "get_reconcile_policy", org()), 200, "Policy: RECENCY (default — newer assertion wins).")
	wantText(t, e.MustOK(admin, "set_reconcile_policy", org("mode", "AUTHORITY", "authority", map[string]int{"crm": 2, "bot": 1})), 200,
		"Reconciliation policy for this space set to AUTHORITY.  authority ranks: {'crm': 2, 'bot': 1}")
	wantText(t, e.MustOK(member, "get_reconcile_policy", org()), 200, "Policy: AUTHORITY\n  authority ranks: {'crm': 2, 'bot': 1}")
	wantText(t, e.MustOK(member, "remember", org("subject", "plan", "value", "Pro", "source", "crm")), 200, "Stored: [ADD] plan = Pro")
	wantText(t, e.MustOK(member, "remember", org("subject", "plan", "value", "Free", "source", "bot")), 200, "Stored: [FLAG] plan = Free")
	wantText(t, e.MustOK(member, "check_before_act", org("subject", "plan")), 200, "⛔ BLOCKED — do NOT act on 'plan':\n  • unresolved conflict (FLAGGED) — the value is disputed")

	// Bad input: a 400 naming the field.
	for _, tc := range []struct {
		args  string
		field string
	}{
		{`{"user_id": "patient_42", "subject": "x", `, ""},
		{`{"user_id": "patient_42", "subject": "x", "value": "y", "colour": "red"}`, "colour"},
		{`{"user_id": "patient_42", "subject": "x", "value": "y", "confidence": "high"}`, "confidence"},
		{`{"user_id": "patient_42", "value": "y"}`, "subject"},
	} {
		r := e.Call(agent, "remember", tc.args)
		if r.Status != http.StatusBadRequest || r.Field != tc.field || r.Error == "" {
			t.Errorf("%s: %s, want 400 field %q", tc.args, r, tc.field)
		}
	}
}

func TestMemoryE2ERestart(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, memoryConfig)
	agent := e.CreateKey("ward_bot", "agent")
	member := e.CreateKey("dr_smith", "member")
	fhir := e.CreateKey("fhir", "agent")
	e.Start()
	sp := func(kv ...any) map[string]any {
		m := map[string]any{"user_id": "patient_42"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	e.MustOK(fhir, "remember", sp("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir"))
	e.MustOK(agent, "remember", sp("subject", "active_medication", "value", "warfarin 7mg daily", "text", "Raise it to 7."))
	e.MustOK(agent, "remember", sp("subject", "state", "value", "Zustand"))
	e = restart(e)

	wantText(t, e.MustOK(agent, "list_memories", sp()), 200, "• active_medication = warfarin 5mg daily  (#1)\n• state = Zustand  (#3)\n"+
		"⚠ active_medication = warfarin 7mg daily  (#2, flagged — needs confirmation)")
	wantText(t, e.MustOK(agent, "pending_changes", sp()), 200, "1 change(s) awaiting approval:\n"+
		"  #2 REPLACE active_medication: 'warfarin 5mg daily' -> 'warfarin 7mg daily'\n"+
		"        said: 'Raise it to 7.'\n\n"+
		"Approve with confirm_change(memory_id), discard with reject_change(memory_id).")
	// Ids continue after the restart, and the proposal can still be decided.
	r := e.MustOK(agent, "remember", sp("subject", "hosting", "value", "Fly.io"))
	if r.Data["memory_id"] != float64(4) {
		t.Fatalf("next id after restart: %v, want memory_id 4", r.Data)
	}
	wantText(t, e.MustOK(member, "confirm_change", sp("memory_id", 2)), 200, "Approved #2: SUPERSEDE active_medication = warfarin 7mg daily")
}

// restart stops the server and starts a new one on the same config file and
// store. It uses a fresh testEnv: testEnv.Start reassigns e.logs while the
// previous run's log reader may still be writing through it (a data race
// under -race when one testEnv is stopped and started again).
func restart(e *testEnv) *testEnv {
	e.t.Helper()
	e.Stop()
	n := &testEnv{t: e.t, dir: e.dir, cfg: e.cfg, env: e.env}
	e.t.Cleanup(n.Stop)
	n.Start()
	return n
}
