package actiontools

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// editTools adds to testTools a mutating tool with a schema and a quorum
// of 2, the kind of call a ward pharmacist edits before approving.
func editTools() []ToolSpec {
	return append(testTools(), ToolSpec{Name: "give_medication", Category: "mutating", Quorum: 2, Schema: map[string]any{
		"type": "object", "required": []any{"drug", "dose"}, "additionalProperties": false,
		"properties": map[string]any{"drug": map[string]any{"type": "string"}, "dose": map[string]any{"type": "string", "maxLength": 16}, "route": map[string]any{"type": "string"}},
	}})
}

func medication() map[string]any {
	return map[string]any{"tool": "give_medication", "user_id": "patient_42", "summary": "apixaban for AF",
		"arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}}
}

// An edit is validated like a new request of the same tool; every bad
// edit is a 400 naming the field, and nothing is recorded.
func TestEditRefusals(t *testing.T) {
	e := newEnv(t, Options{Tools: editTools()})
	agent := e.principal("ward-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	med, _ := e.ok(agent, "confirm_action", medication())
	exec, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": "kubectl rollout restart deploy/web"}})
	destroy, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	consent, _ := e.ok(agent, "request_approval", map[string]any{"user_id": "u1", "action": "delete the staging database"})

	tests := []struct {
		name  string
		id    any
		args  any
		field string
		want  string
	}{
		{"schema violation", med["request_id"], map[string]any{"drug": "apixaban", "dose": "2.5mg", "route": 7}, "arguments", "declared schema of give_medication"},
		{"schema: unknown property", med["request_id"], map[string]any{"drug": "apixaban", "dose": "2.5mg", "tool": "delete_database"}, "arguments", "declared schema"},
		{"required argument dropped", med["request_id"], map[string]any{"drug": "apixaban"}, "arguments.dose", "keep every required argument"},
		{"exec command off the allowlist", exec["request_id"], map[string]any{"command": "rm -rf /"}, "arguments.command", "not on the command allowlist"},
		{"exec edit escaping its category (destructive)", exec["request_id"], map[string]any{"command": "kubectl delete pod web-1"}, "arguments", "cannot change a call's category"},
		{"exec edit escaping its category (read-only)", exec["request_id"], map[string]any{"command": "kubectl get pods"}, "arguments", "cannot change a call's category"},
		{"exec edit without a command", exec["request_id"], map[string]any{}, "arguments.command", "required"},
		{"a destructive call is not edited", destroy["request_id"], map[string]any{"db_name": "staging"}, "arguments", "dry-run plan describes the proposed arguments"},
		{"a consent has no arguments", consent["request_id"], map[string]any{"x": 1}, "arguments", "no arguments to edit"},
		{"arguments must be an object", med["request_id"], []any{1}, "arguments", ""},
	}
	before := len(e.audits("action_vote", "action_approved", "access_denied"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := e.fail(alice, "approve_action", map[string]any{"request_id": tt.id, "arguments": tt.args})
			if be.Kind != bot.KindInvalid || be.Field != tt.field || !strings.Contains(be.Msg, tt.want) {
				t.Fatalf("got %v (field %q), want a 400 on %q saying %q", be, be.Field, tt.field, tt.want)
			}
		})
	}
	// approve_action names no space or tool: an edit cannot move the call.
	for _, extra := range []string{"user_id", "tool"} {
		if be := e.fail(alice, "approve_action", map[string]any{"request_id": med["request_id"], extra: "other", "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}}); be.Kind != bot.KindInvalid || be.Field != extra {
			t.Fatalf("approve_action with %s: %v (kind %d), want KindInvalid on field %s", extra, be, be.Kind, extra)
		}
	}
	// An edit is bounded like a proposal (limits.max_arguments_bytes): 413.
	big := map[string]any{"drug": "apixaban", "dose": strings.Repeat("9", DefaultMaxArgBytes)}
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": med["request_id"], "arguments": big}); be.Kind != bot.KindTooLarge || be.Field != "arguments" {
		t.Fatalf("oversized edit: %v (kind %d), want KindTooLarge on field arguments", be, be.Kind)
	}
	// deny_action takes no arguments.
	if be := e.fail(alice, "deny_action", map[string]any{"request_id": med["request_id"], "arguments": map[string]any{"dose": "1mg"}}); be.Kind != bot.KindInvalid || be.Field != "arguments" {
		t.Fatalf("deny with arguments: %v (kind %d), want KindInvalid on field arguments", be, be.Kind)
	}
	// Nothing was recorded: no vote, no decision, the requests untouched.
	if n := len(e.audits("action_vote", "action_approved", "access_denied")); n != before {
		t.Fatalf("bad edits recorded %d audit entries, want 0", n-before)
	}
	for _, id := range []any{med["request_id"], exec["request_id"], destroy["request_id"]} {
		r := e.request(id.(string))
		if r.Status != approvals.StatusPending || len(r.Votes) != 0 || r.Action.Edited {
			t.Fatalf("%s changed by a bad edit: %s votes %d edited %v; want %s, no votes, not edited", id, r.Status, len(r.Votes), r.Action.Edited, approvals.StatusPending)
		}
	}

	// The requester cannot approve their own request with changes either:
	// an edit is no second path around requester ≠ approver, scopes or
	// roles (a 403, audited as a refusal).
	mine, _ := e.ok(alice, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": mine["request_id"], "arguments": map[string]any{"service": "api"}}); be.Kind != bot.KindDenied || !strings.Contains(be.Msg, "never decided by its own requester") {
		t.Fatalf("self-edit: %v (kind %d), want KindDenied naming %q", be, be.Kind, "never decided by its own requester")
	}
	scoped := e.principal("bob", policy.RoleMember, "person", "patient_7")
	if be := e.fail(scoped, "approve_action", map[string]any{"request_id": med["request_id"], "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}}); be.Kind != bot.KindDenied || !strings.Contains(be.Msg, "outside your assigned scope") {
		t.Fatalf("edit outside scope: %v (kind %d), want KindDenied naming %q", be, be.Kind, "outside your assigned scope")
	}
	if be := e.fail(agent, "approve_action", map[string]any{"request_id": med["request_id"], "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}}); be.Kind != bot.KindDenied {
		t.Fatalf("agent edit: %v (kind %d), want KindDenied", be, be.Kind)
	}
	if r := e.request(med["request_id"].(string)); r.Action.Edited || len(r.Votes) != 0 {
		t.Fatalf("a refused edit changed the request: %+v, %d votes; want it not edited, no votes", r.Action, len(r.Votes))
	}
}

// Under a quorum an edit restarts the count; a later approval without
// arguments approves the edited version; the outcome, the audit, the item
// and the receipt carry the approved arguments and both hashes.
func TestEditQuorum(t *testing.T) {
	e := newEnv(t, Options{Tools: editTools()})
	agent := e.principal("ward-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	carol := e.principal("carol", policy.RoleMember, "person")
	med, _ := e.ok(agent, "confirm_action", medication())
	id := med["request_id"].(string)
	proposedHash := med["args_sha256"].(string)

	// carol approves the proposal: 1 of 2.
	if d, _ := e.ok(carol, "approve_action", map[string]any{"request_id": id}); d["tally"] != "1 of 2 approvals: carol" {
		t.Fatalf("carol: tally %v, want %q", d["tally"], "1 of 2 approvals: carol")
	}
	// alice approves with changes: the count restarts on the edited version.
	d, text := e.ok(alice, "approve_action", map[string]any{"request_id": id, "reason": "renal function", "arguments": map[string]any{"dose": "2.5mg", "drug": "apixaban"}})
	edited := `{"dose":"2.5mg","drug":"apixaban"}`
	wantHash := receipt.HashCanonical("give_medication", []byte(edited))
	if d["status"] != "pending" || d["tally"] != "1 of 2 approvals: alice" || d["edited"] != true || d["edited_args_sha256"] != wantHash || d["args_sha256"] != proposedHash {
		t.Fatalf("after the edit: %v, want status pending, tally %q, edited true, edited_args_sha256 %s and args_sha256 %s", d, "1 of 2 approvals: alice", wantHash, proposedHash)
	}
	if !strings.Contains(text, "dose 5mg → 2.5mg") || !strings.Contains(text, "no longer count") {
		t.Fatalf("counted text: %s, want it to name %q and %q", text, "dose 5mg → 2.5mg", "no longer count")
	}
	// The same edit again is no edit: alice's approval is already counted.
	if d, _ := e.ok(alice, "approve_action", map[string]any{"request_id": id, "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}}); d["tally"] != "1 of 2 approvals: alice" {
		t.Fatalf("the same edit again: tally %v, want %q", d["tally"], "1 of 2 approvals: alice")
	}
	// The item shows the edit and offers the edited version to edit.
	it, err := e.b.Items().Get(context.Background(), uint64(med["item_id"].(float64)))
	if err != nil {
		t.Fatal(err)
	}
	if it.Changes == nil || it.Changes.By != "alice ["+alice.ID+"]" || it.Changes.Text() != "dose 5mg → 2.5mg" || it.Changes.ProposedSHA256 != proposedHash || it.Changes.ApprovedSHA256 != wantHash {
		t.Fatalf("item changes: %+v, want by %q, text %q, proposed %s and approved %s", it.Changes, "alice ["+alice.ID+"]", "dose 5mg → 2.5mg", proposedHash, wantHash)
	}
	if it.Editable == nil || it.Editable.Kind != bot.EditArguments || string(it.Editable.Current) != edited {
		t.Fatalf("item editable: %+v, want kind %s with current %s", it.Editable, bot.EditArguments, edited)
	}
	// The card lists the edited version; its Details label the proposal
	// beside it.
	labels := map[string]string{}
	for _, f := range it.Details {
		labels[f.Label] = f.Value
	}
	if _, plain := labels["Arguments (JSON)"]; plain || labels["Proposed arguments (JSON)"] != `{"dose":"5mg","drug":"apixaban"}` || labels["Edited arguments (JSON)"] != edited {
		t.Fatalf("an edited item's argument details: %+v, want no %q, proposed %s and edited %s", it.Details, "Arguments (JSON)", `{"dose":"5mg","drug":"apixaban"}`, edited)
	}
	if !slices.Contains(it.Args, bot.Field{Label: "dose", Value: "2.5mg"}) {
		t.Fatalf("the card's arguments are not the edited version: %+v, want dose 2.5mg among them", it.Args)
	}
	// bob approves without arguments: since the request was edited, only
	// naming the version he reviewed (issue 19: a plain approval would
	// count for whatever version is current), and the edited version is
	// approved.
	if err := e.fail(bob, "approve_action", map[string]any{"request_id": id}); err.Kind != bot.KindConflict || err.Field != "args_sha256" || !strings.Contains(err.Msg, "must name the version") {
		t.Fatalf("bob's approval without the version: %+v, want a 409 naming args_sha256", err)
	}
	d, text = e.ok(bob, "approve_action", map[string]any{"request_id": id, "args_sha256": wantHash})
	if d["status"] != "approved" || d["confirmed_by"] != "alice ["+alice.ID+"], bob ["+bob.ID+"]" {
		t.Fatalf("bob: %v, want status approved and confirmed_by %q", d, "alice ["+alice.ID+"], bob ["+bob.ID+"]")
	}
	var approved map[string]any
	raw, _ := json.Marshal(d["approved_arguments"])
	_ = json.Unmarshal(raw, &approved)
	if approved["dose"] != "2.5mg" || d["approved_args_sha256"] != wantHash || d["args_sha256"] != proposedHash || d["edited_by"] != "alice ["+alice.ID+"]" {
		t.Fatalf("approved outcome: %v, want approved dose 2.5mg, approved_args_sha256 %s, args_sha256 %s and edited_by %q", d, wantHash, proposedHash, "alice ["+alice.ID+"]")
	}
	if !strings.Contains(text, "approved with changes by alice") || !strings.Contains(text, "not the arguments you proposed") {
		t.Fatalf("approved text: %s, want it to name %q and %q", text, "approved with changes by alice", "not the arguments you proposed")
	}
	// The receipt binds the approved arguments' hash.
	p, err := receipt.Verify(d["receipt"].(string), e.b.PublicKey(), e.clock.Now())
	if err != nil || p.ApprovedArgsSHA256 != wantHash {
		t.Fatalf("receipt: %+v %v, want approved args hash %s and no error", p, err, wantHash)
	}
	// The audit names both hashes and the editor, on the vote and on the
	// decision.
	votes := e.audits("action_vote")
	if len(votes) != 2 || !strings.Contains(votes[1].Detail, "approve with changes by alice") || !strings.Contains(votes[1].Detail, "args_sha256="+proposedHash) || !strings.Contains(votes[1].Detail, "approved_args_sha256="+wantHash) {
		t.Fatalf("vote entries: %+v, want 2, the second naming %q, %q and %q", votes, "approve with changes by alice", "args_sha256="+proposedHash, "approved_args_sha256="+wantHash)
	}
	dec := e.audits("action_approved")
	if len(dec) != 1 || !strings.Contains(dec[0].Detail, "args_sha256="+proposedHash) || !strings.Contains(dec[0].Detail, "approved_args_sha256="+wantHash) || !strings.Contains(dec[0].Detail, "edited_by=alice") {
		t.Fatalf("decision entry: %+v, want 1 naming %q, %q and %q", dec, "args_sha256="+proposedHash, "approved_args_sha256="+wantHash, "edited_by=alice")
	}
	// The decided item: approved with changes; no longer editable.
	it, _ = e.b.Items().Get(context.Background(), uint64(med["item_id"].(float64)))
	if it.Editable != nil || it.Changes == nil || it.Status != "approved" {
		t.Fatalf("decided item: %+v, want status approved, with changes, not editable", it)
	}
	// An edit after the decision conflicts.
	if be := e.fail(carol, "approve_action", map[string]any{"request_id": id, "arguments": map[string]any{"drug": "apixaban", "dose": "1mg"}}); be.Kind != bot.KindConflict {
		t.Fatalf("late edit: %v (kind %d), want KindConflict", be, be.Kind)
	}
	// The requester redeems the receipt: the executed entry names the
	// approved hash.
	e.ok(agent, "redeem_receipt", map[string]any{"receipt": d["receipt"]})
	if ex := e.audits("action_executed"); len(ex) != 1 || !strings.Contains(ex[0].Detail, "approved_args_sha256 "+wantHash) {
		t.Fatalf("executed: %+v, want 1 entry naming %q", ex, "approved_args_sha256 "+wantHash)
	}
}

// An exec edit within the same allowlist entry is accepted; the chat path
// (bot.EditItem) is the same approve_action.
func TestEditExecThroughItem(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": "kubectl rollout restart deploy/web"}})
	item := uint64(d["item_id"].(float64))
	if _, err := e.b.EditItem(context.Background(), alice, item, json.RawMessage(`["x"]`), ""); bot.KindOf(err) != bot.KindInvalid {
		t.Fatalf("non-object edit through the item: %v (kind %d), want KindInvalid", err, bot.KindOf(err))
	}
	res, err := e.b.EditItem(context.Background(), alice, item, json.RawMessage(`{"command":"kubectl rollout restart deploy/api"}`), "web is fine, api is stuck")
	if err != nil {
		t.Fatal(err)
	}
	m := asMap(t, res.Data)
	if m["status"] != "approved" || m["edited"] != true || m["command"] != "kubectl rollout restart" {
		t.Fatalf("exec edit: %v, want status approved, edited true and command %q", m, "kubectl rollout restart")
	}
	it, _ := e.b.Items().Get(context.Background(), item)
	if got := it.Changes.Text(); got != "command kubectl rollout restart deploy/web → kubectl rollout restart deploy/api" {
		t.Fatalf("diff: %q, want %q", got, "command kubectl rollout restart deploy/web → kubectl rollout restart deploy/api")
	}
}

// The signed callback of an approval with changes carries the approved
// (edited) arguments, both hashes and edited=true, and its receipt binds
// the approved hash.
func TestEditCallback(t *testing.T) {
	secret := []byte("test-callback-secret-0123456789")
	rc := &receiver{t: t, secret: secret, status: 200}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newEnv(t, Options{Tools: editTools(), CallbackSecret: secret, CallbackHosts: []string{srv.Listener.Addr().String()}})
	rc.now = e.clock.Now
	agent := e.principal("ward-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	args := medication()
	args["callback_url"] = srv.URL
	d, _ := e.ok(agent, "confirm_action", args)
	id := d["request_id"].(string)
	ed, _ := e.ok(alice, "approve_action", map[string]any{"request_id": id, "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}})
	e.ok(bob, "approve_action", map[string]any{"request_id": id, "args_sha256": ed["edited_args_sha256"]})
	if err := e.b.Outbox().Drain(context.Background(), CallbackSink, e.s.DeliverCallback); err != nil {
		t.Fatal(err)
	}
	_, ok, bad := rc.snapshot()
	if len(ok) != 1 || bad != 0 {
		t.Fatalf("deliveries: %d ok, %d bad; want 1 ok, 0 bad", len(ok), bad)
	}
	cb := ok[0].Data
	want := receipt.HashCanonical("give_medication", []byte(`{"dose":"2.5mg","drug":"apixaban"}`))
	approved, _ := json.Marshal(cb["approved_arguments"])
	if cb["status"] != "approved" || cb["edited"] != true || cb["approved_args_sha256"] != want || cb["args_sha256"] != d["args_sha256"] ||
		string(approved) != `{"dose":"2.5mg","drug":"apixaban"}` || cb["edited_by"] != "alice ["+alice.ID+"]" {
		t.Fatalf("callback data: %v, want status approved, edited true, approved_args_sha256 %s, args_sha256 %v, approved_arguments %s and edited_by %q", cb, want, d["args_sha256"], `{"dose":"2.5mg","drug":"apixaban"}`, "alice ["+alice.ID+"]")
	}
	p, err := receipt.Verify(cb["receipt"].(string), e.b.PublicKey(), e.clock.Now())
	if err != nil || p.ApprovedArgsSHA256 != want {
		t.Fatalf("callback receipt: %+v %v, want approved args hash %s and no error", p, err, want)
	}
}

// A "tool" key inside the edited arguments is only an argument: the tool
// that runs, the receipt's tool and the space stay the request's.
func TestEditNeverChangesTheTool(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "restart_service", "user_id": "shop", "arguments": map[string]any{"service": "web"}})
	got, _ := e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"], "arguments": map[string]any{"service": "web", "tool": "delete_database"}})
	p, err := receipt.Verify(got["receipt"].(string), e.b.PublicKey(), e.clock.Now())
	r := e.request(d["request_id"].(string))
	if err != nil || got["tool"] != "restart_service" || p.Tool != "restart_service" || r.Action.Tool != "restart_service" || r.Space.UserID != "shop" || r.Action.Category != "mutating" {
		t.Fatalf("tool %v, receipt %+v (%v), space %+v, request tool %s category %s; want restart_service in all three, user shop, category mutating and no error", got["tool"], p, err, r.Space, r.Action.Tool, r.Action.Category)
	}
	if p.ApprovedArgsSHA256 != receipt.HashCanonical("restart_service", []byte(`{"service":"web","tool":"delete_database"}`)) {
		t.Fatalf("receipt hash: %s, want %s", p.ApprovedArgsSHA256, receipt.HashCanonical("restart_service", []byte(`{"service":"web","tool":"delete_database"}`)))
	}
}
