package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/memory"
)

// editConfig declares a mutating tool with a schema and a quorum of 2: a
// dose a pharmacist edits before approving.
const editConfig = `
tools:
  - name: give_medication
    category: mutating
    quorum: 2
    schema:
      type: object
      required: [drug, dose]
      additionalProperties: false
      properties:
        drug: {type: string}
        dose: {type: string}
`

// TestE2EEditedActionQuorum is issue 15 item 1 against the real server: an
// edited action approval with quorum 2. An approval of the proposal stops
// counting when alice approves with changes (1 of 2 on the edited
// version); bob's plain approval approves the edited version; the agent's
// Go client waits, receives the edited arguments with edited=true and
// verifies the receipt against the approved hash; the audit names both
// hashes and the editor.
func TestE2EEditedActionQuorum(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, editConfig)
	agent := e.CreateKey("ward-bot", "agent")
	alice := e.CreateKey("alice", "member")
	bob := e.CreateKey("bob", "member")
	carol := e.CreateKey("carol", "member")
	admin := e.CreateKey("root", "admin")
	e.Start()

	pk := e.MustOK(agent, "export_public_key", nil)
	pub, err := hex.DecodeString(pk.Data["public_key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	cl := mustClient(t, e.URL, agent, ed25519.PublicKey(pub))
	cl.PollWait = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proposal := client.Action{Tool: "give_medication", Arguments: json.RawMessage(`{"drug": "apixaban", "dose": "5mg"}`),
		Summary: "start apixaban for AF", ActionID: "med-42-1"}
	type result struct {
		a   *client.Approval
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := cl.ConfirmAction(ctx, proposal)
		done <- result{a, err}
	}()
	// The same action_id and body name the same request: its id.
	req := e.MustOK(agent, "confirm_action", proposal)
	id, proposedHash := req.Data["request_id"].(string), req.Data["args_sha256"].(string)

	// carol approves the proposal: 1 of 2.
	if r := e.MustOK(carol, "approve_action", map[string]any{"request_id": id}); r.Data["tally"] != "1 of 2 approvals: carol" {
		t.Fatalf("carol: tally = %v, want %q: %s", r.Data["tally"], "1 of 2 approvals: carol", r)
	}
	// Bad edits are 400s naming the field; nothing is recorded.
	for _, bad := range []struct {
		args  any
		field string
	}{
		{map[string]any{"drug": "apixaban", "dose": "2.5mg", "route": "iv"}, "arguments"},
		{map[string]any{"drug": "apixaban"}, "arguments.dose"},
		{[]any{"2.5mg"}, "arguments"},
	} {
		if r := e.Call(alice, "approve_action", map[string]any{"request_id": id, "arguments": bad.args}); r.Status != http.StatusBadRequest || r.Field != bad.field {
			t.Fatalf("bad edit %v: status = %d, field = %q, want %d on %q: %s", bad.args, r.Status, r.Field, http.StatusBadRequest, bad.field, r)
		}
	}
	// alice approves with changes: the count restarts on the edited version.
	r := e.MustOK(alice, "approve_action", map[string]any{"request_id": id, "reason": "eGFR 28: reduced dose", "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}})
	if r.Data["status"] != "pending" || r.Data["tally"] != "1 of 2 approvals: alice" || r.Data["edited"] != true || r.Data["args_sha256"] != proposedHash {
		t.Fatalf("alice's edit: %s, want pending, tally %q, edited, args_sha256 %s", r, "1 of 2 approvals: alice", proposedHash)
	}
	editedHash := r.Data["edited_args_sha256"].(string)
	if editedHash == proposedHash || !strings.Contains(r.Text, "dose 5mg → 2.5mg") {
		t.Fatalf("alice's edit: %s, want an edited_args_sha256 other than %s and the text to say %q", r, proposedHash, "dose 5mg → 2.5mg")
	}
	// The agent sees the edit while it waits.
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": id}); st.Data["status"] != "pending" || st.Data["edited"] != true || st.Data["tally"] != "1 of 2 approvals: alice" {
		t.Fatalf("pending status: %s, want pending, edited, tally %q", st, "1 of 2 approvals: alice")
	}
	// bob approves without arguments, naming the version he reviewed (an
	// edited request takes no approval that names none): the edited
	// version is approved.
	if r := e.Call(bob, "approve_action", map[string]any{"request_id": id}); r.Status != http.StatusConflict || r.Field != "args_sha256" {
		t.Fatalf("bob's approval naming no version: %s, want 409 on args_sha256", r)
	}
	r = e.MustOK(bob, "approve_action", map[string]any{"request_id": id, "args_sha256": editedHash})
	if r.Data["status"] != "approved" || r.Data["approved_args_sha256"] != editedHash || !strings.Contains(r.Data["confirmed_by"].(string), "alice [") || strings.Contains(r.Data["confirmed_by"].(string), "carol") {
		t.Fatalf("bob: %s, want approved, approved_args_sha256 %s, confirmed by alice and not carol", r, editedHash)
	}

	res := <-done
	if res.err != nil {
		t.Fatalf("ConfirmAction: %v", res.err)
	}
	a := res.a
	var got map[string]string
	if err := json.Unmarshal(a.Arguments, &got); err != nil || got["dose"] != "2.5mg" || got["drug"] != "apixaban" || !a.Edited {
		t.Fatalf("the client's approval: %+v (%s), want edited to %s", a, a.Arguments, `{"drug":"apixaban","dose":"2.5mg"}`)
	}
	if a.Payload.ApprovedArgsSHA256 != editedHash || a.RequestID != id {
		t.Fatalf("receipt payload: %+v, want approved hash %s", a.Payload, editedHash)
	}
	// action_status keeps the proposal and carries the approved version.
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": id, "wait_seconds": 1})
	var approved map[string]string
	raw, _ := json.Marshal(st.Data["approved_arguments"])
	if err := json.Unmarshal(raw, &approved); err != nil || approved["dose"] != "2.5mg" || st.Data["args_sha256"] != proposedHash ||
		st.Data["approved_args_sha256"] != editedHash || st.Data["edited"] != true || st.Data["receipt"] != a.Receipt {
		t.Fatalf("action_status: %s, want the proposal %s, the approved version %s (dose 2.5mg), edited, the client's receipt", st, proposedHash, editedHash)
	}
	if err := cl.Redeem(ctx, a.Receipt); err != nil {
		t.Fatalf("Redeem: %v", err)
	}

	// The audit: the vote of the edit and the decision name both hashes
	// and the editor.
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 50}).Text
	var vote, decision bool
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, id) {
			continue
		}
		both := strings.Contains(line, "args_sha256="+proposedHash) && strings.Contains(line, "approved_args_sha256="+editedHash)
		switch {
		case strings.Contains(line, "action_vote") && strings.Contains(line, "approve with changes by alice"):
			vote = both
		case strings.Contains(line, "action_approved"):
			decision = both && strings.Contains(line, "edited_by=alice")
		}
	}
	if !vote || !decision {
		t.Fatalf("audit (vote %v, decision %v), want both naming args_sha256=%s and approved_args_sha256=%s, the decision edited_by=alice:\n%s", vote, decision, proposedHash, editedHash, log)
	}
}

// TestE2EEditedMemoryProposal: the seed's apixaban 5 mg is proposed,
// approved as 2.5 mg; recall returns 2.5 mg; the audit names both values'
// hashes.
func TestE2EEditedMemoryProposal(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, memoryConfig)
	agent := e.CreateKey("ward_bot", "agent", "--scopes", "patient_42")
	member := e.CreateKey("dr_smith", "member")
	fhir := e.CreateKey("fhir", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()
	p42 := func(kv ...any) map[string]any {
		m := map[string]any{"user_id": "patient_42"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	wantText(t, e.MustOK(fhir, "remember", p42("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir")), 200, "Stored: [ADD] active_medication = warfarin 5mg daily")
	wantText(t, e.MustOK(agent, "remember", p42("subject", "meds", "value", "apixaban 5mg twice daily", "replaces", "warfarin", "text", "Switch her to apixaban 5mg twice daily.")), 200, "Stored: [FLAG] active_medication = apixaban 5mg twice daily")

	// The agent cannot approve it, edited or not; another drug is not an edit.
	if r := e.Call(agent, "confirm_change", p42("memory_id", 2, "value", "apixaban 2.5mg twice daily")); r.Status != http.StatusForbidden {
		t.Fatalf("agent edit: status = %d, want %d: %s", r.Status, http.StatusForbidden, r)
	}
	if r := e.Call(member, "confirm_change", p42("memory_id", 2, "value", "rivaroxaban 20mg daily")); r.Status != http.StatusBadRequest || r.Field != "value" {
		t.Fatalf("another drug: status = %d, field = %q, want %d on %q: %s", r.Status, r.Field, http.StatusBadRequest, "value", r)
	}
	r := e.MustOK(member, "confirm_change", p42("memory_id", 2, "value", "apixaban 2.5mg twice daily", "reason", "age over 80, weight under 60 kg"))
	wantText(t, r, 200, "Approved #2 with changes: SUPERSEDE active_medication = apixaban 2.5mg twice daily (proposed: apixaban 5mg twice daily)")
	if r.Data["edited"] != true || r.Data["proposed_sha256"] != memory.ValueSHA256("apixaban 5mg twice daily") || r.Data["approved_sha256"] != memory.ValueSHA256("apixaban 2.5mg twice daily") {
		t.Fatalf("confirm_change data: %s, want edited, proposed_sha256 and approved_sha256 of the 5mg and 2.5mg values", r)
	}
	rec := e.MustOK(agent, "recall", p42("question", "what anticoagulant is she on?"))
	if !strings.Contains(rec.Text, "apixaban 2.5mg twice daily") || strings.Contains(rec.Text, "apixaban 5mg") {
		t.Fatalf("recall: %q, want %q and no %q", rec.Text, "apixaban 2.5mg twice daily", "apixaban 5mg")
	}
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 50}).Text
	if !strings.Contains(log, "with changes by dr_smith") || !strings.Contains(log, memory.ValueSHA256("apixaban 5mg twice daily")) || !strings.Contains(log, memory.ValueSHA256("apixaban 2.5mg twice daily")) {
		t.Fatalf("audit:\n%s\nwant %q and both values' SHA-256", log, "with changes by dr_smith")
	}
}

// TestE2EEditOverMCP: the same approval with changes over MCP: the
// approve_action tool advertises arguments in its input schema, a bad edit
// is a tool error naming the field, and an edit approves the edited
// version, which the agent reads back over MCP.
func TestE2EEditOverMCP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, strings.Replace(editConfig, "quorum: 2", "quorum: 1", 1))
	agent := e.CreateKey("ward-bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	// The agent on 2025-11-25: its pending confirm_action answers at once
	// (a 2026-07-28 client waits, MRTR: TestMCPLongWaitsCompleteAfterASlackClick).
	ag, al := e.mcpSessionVersion(agent, "2025-11-25"), e.mcpSession(alice)

	tools, err := al.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var advertised bool
	for _, tl := range tools.Tools {
		if tl.Name == "approve_action" {
			raw, _ := json.Marshal(tl.InputSchema)
			advertised = strings.Contains(string(raw), `"arguments"`)
		}
	}
	if !advertised {
		t.Fatal("approve_action's input schema does not list arguments, want an \"arguments\" property")
	}
	_, r := mcpCall(t, ag, "confirm_action", map[string]any{"tool": "give_medication", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	id := r.StructuredContent.(map[string]any)["request_id"].(string)
	if text, r := mcpCall(t, al, "approve_action", map[string]any{"request_id": id, "arguments": map[string]any{"drug": "apixaban"}}); !r.IsError || !strings.Contains(text, "arguments.dose") {
		t.Fatalf("bad edit over MCP: isError %v %q, want a tool error naming %q", r.IsError, text, "arguments.dose")
	}
	if text := mcpOK(t, al, "approve_action", map[string]any{"request_id": id, "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}}); !strings.Contains(text, "approved with changes by alice") {
		t.Fatalf("edit over MCP: %q, want it to say %q", text, "approved with changes by alice")
	}
	_, st := mcpCall(t, ag, "action_status", map[string]any{"request_id": id})
	d := st.StructuredContent.(map[string]any)
	approved, _ := json.Marshal(d["approved_arguments"])
	if d["status"] != "approved" || d["edited"] != true || string(approved) != `{"dose":"2.5mg","drug":"apixaban"}` {
		t.Fatalf("action_status over MCP: %v, want approved, edited, approved_arguments %s", d, `{"dose":"2.5mg","drug":"apixaban"}`)
	}
}
