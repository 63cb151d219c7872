package actiontools

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

func TestAskUser(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")

	d, text := e.ok(agent, "ask_user", map[string]any{"question": "Which region?", "options": []string{"eu-west-1", "us-east-1"}, "context": "for the new server"})
	id := d["request_id"].(string)
	if !strings.HasPrefix(id, "ask_") || d["status"] != "pending" || !strings.Contains(text, "action_status") {
		t.Fatalf("ask = %v %q, want an ask_ request_id, status pending and a text naming action_status", d, text)
	}
	// An answer is not an approval, and approve_action refuses questions.
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": id}); be.Kind != bot.KindInvalid || !strings.Contains(be.Msg, "answer_question") {
		t.Fatalf("approve a question: %v (kind %d), want KindInvalid naming answer_question", be, be.Kind)
	}
	for _, bad := range []map[string]any{
		{"request_id": id, "answers": []string{"mars-1"}},
		{"request_id": id, "answers": []string{"eu-west-1", "us-east-1"}},
		{"request_id": id},
		{"request_id": id, "decline": true, "answers": []string{"eu-west-1"}},
	} {
		if be := e.fail(alice, "answer_question", bad); be.Kind != bot.KindInvalid {
			t.Fatalf("%v: %v (kind %d), want KindInvalid", bad, be, be.Kind)
		}
	}
	if be := e.fail(agent, "answer_question", map[string]any{"request_id": id, "answers": []string{"eu-west-1"}}); be.Kind != bot.KindDenied {
		t.Fatalf("the agent answering its own question: %v (kind %d), want KindDenied", be, be.Kind)
	}
	got, _ := e.ok(alice, "answer_question", map[string]any{"request_id": id, "answers": []string{" EU-WEST-1 "}})
	if got["status"] != "answered" || !slices.Equal(toStrings(got["answers"]), []string{"eu-west-1"}) || got["confirmed_by"] != "" {
		t.Fatalf("answer = %v, want status answered, answers [eu-west-1] and an empty confirmed_by", got)
	}
	st, text := e.ok(agent, "action_status", map[string]any{"request_id": id})
	if st["status"] != "answered" || !slices.Equal(toStrings(st["answers"]), []string{"eu-west-1"}) || !strings.Contains(text, "eu-west-1") {
		t.Fatalf("status = %v %q, want status answered, answers [eu-west-1] and a text naming eu-west-1", st, text)
	}
	if be := e.fail(e.principal("bob", policy.RoleMember, "person"), "answer_question", map[string]any{"request_id": id, "answers": []string{"us-east-1"}}); be.Kind != bot.KindConflict {
		t.Fatalf("second answer: %v (kind %d), want KindConflict", be, be.Kind)
	}

	// Multiple choice through chat (DecideItem), and a free-text question.
	m, _ := e.ok(agent, "ask_user", map[string]any{"question": "Which checks?", "options": []string{"lint", "test", "race"}, "multi": true})
	res, err := e.b.DecideItem(context.Background(), alice, uint64(m["item_id"].(float64)), true, "", []string{"test", "race"})
	if err != nil || !slices.Equal(toStrings(asMap(t, res.Data)["answers"]), []string{"test", "race"}) {
		t.Fatalf("multi answer through chat = %v, %v, want answers [test race] and no error", res, err)
	}
	f, _ := e.ok(agent, "ask_user", map[string]any{"question": "Name the release?"})
	if got, _ := e.ok(alice, "answer_question", map[string]any{"request_id": f["request_id"], "text": "Lighthouse"}); got["text"] != "Lighthouse" {
		t.Fatalf("free text = %v, want text %q", got, "Lighthouse")
	}
	dc, _ := e.ok(agent, "ask_user", map[string]any{"question": "Drop the cache?", "options": []string{"yes", "no"}})
	if got, _ := e.ok(alice, "answer_question", map[string]any{"request_id": dc["request_id"], "decline": true, "text": "ask the DBA"}); got["status"] != "declined" || got["reason"] != "ask the DBA" {
		t.Fatalf("decline = %v, want status declined and reason %q", got, "ask the DBA")
	}
	// Unanswered questions expire after the default timeout.
	q, _ := e.ok(agent, "ask_user", map[string]any{"question": "Still there?"})
	e.sweep(31 * time.Minute)
	if st, _ := e.ok(agent, "action_status", map[string]any{"request_id": q["request_id"]}); st["status"] != "expired" {
		t.Fatalf("unanswered question = %v, want status expired", st)
	}
	if got := e.audits("question_answered"); len(got) != 3 {
		t.Fatalf("%d answers audited, want 3", len(got))
	}
	for _, bad := range []map[string]any{
		{"question": ""},
		{"question": "?", "options": []string{"a", "A"}},
		{"question": "?", "multi": true},
		{"question": "?", "options": []string{""}},
	} {
		if be := e.fail(agent, "ask_user", bad); be.Kind != bot.KindInvalid {
			t.Fatalf("%v: %v (kind %d), want KindInvalid", bad, be, be.Kind)
		}
	}
}

func TestSoftApproval(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("coder", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	space := map[string]any{"user_id": "u1", "agent_id": "coder"}
	with := func(m map[string]any) map[string]any {
		for k, v := range space {
			m[k] = v
		}
		return m
	}

	d, text := e.ok(agent, "get_approval_mode", with(map[string]any{}))
	if d["mode"] != "normal" || d["source"] != "default" || !strings.Contains(d["prompt"].(string), "force-pushing") || !strings.Contains(text, "system prompt") {
		t.Fatalf("default mode = %v %q, want mode normal, source default, a prompt naming force-pushing and a text naming %q", d, text, "system prompt")
	}
	for _, tt := range []struct{ in, want string }{{"Paranoid", "protective"}, {"yolo", "off"}, {"standard", "normal"}, {"careful", "protective"}} {
		if got, _ := e.ok(agent, "set_approval_mode", with(map[string]any{"mode": tt.in})); got["mode"] != tt.want {
			t.Fatalf("set %s = %v, want mode %s", tt.in, got, tt.want)
		}
		if got, _ := e.ok(agent, "get_approval_mode", with(map[string]any{})); got["mode"] != tt.want || got["source"] != "set" {
			t.Fatalf("get after %s = %v, want mode %s and source set", tt.in, got, tt.want)
		}
	}
	if got, _ := e.ok(agent, "get_approval_mode", map[string]any{"user_id": "u2"}); got["mode"] != "normal" {
		t.Fatalf("another space changed: %v, want mode normal", got)
	}
	e.ok(agent, "set_approval_mode", with(map[string]any{"mode": "off"}))
	if got, text := e.ok(agent, "get_approval_mode", with(map[string]any{})); got["prompt"] != "" || !strings.Contains(text, "no prompt") {
		t.Fatalf("off = %v %q, want an empty prompt and a text naming %q", got, text, "no prompt")
	}
	be := e.fail(agent, "set_approval_mode", with(map[string]any{"mode": "strict"}))
	if be.Kind != bot.KindInvalid || be.Field != "mode" || !strings.Contains(be.Msg, "off, normal or protective") || !strings.Contains(be.Msg, "yolo") {
		t.Fatalf("bad mode: %v (kind %d), want KindInvalid on field mode, naming %q and %q", be, be.Kind, "off, normal or protective", "yolo")
	}

	// request_approval: the pause, shown in chat; default question.
	r, text := e.ok(agent, "request_approval", with(map[string]any{"action": "delete the staging database", "turn": 3, "message_id": "m-17"}))
	if r["awaiting_approval"] != true || r["question"] != "Go ahead?" || r["turn"] != "3" || r["message_id"] != "m-17" || r["status"] != "pending" || !strings.Contains(text, "End your turn") {
		t.Fatalf("request_approval = %v %q, want awaiting_approval true, question %q, turn %q, message_id m-17, status pending and a text naming %q", r, text, "Go ahead?", "3", "End your turn")
	}
	if n := len(e.events("slack", bot.EventCreated)); n != 1 {
		t.Fatalf("%d chat items, want 1", n)
	}
	// record_approval closes it as recorded: not a person's decision.
	rec, text := e.ok(agent, "record_approval", with(map[string]any{"action": "delete the staging database", "detail": "DROP DATABASE staging", "turn": "4", "message_id": "m-18", "request_id": r["request_id"]}))
	if rec["status"] != "recorded" || rec["recorded"] != true || rec["confirmed_by"] != "" || rec["turn"] != "4" || !strings.Contains(text, "One approval covers") {
		t.Fatalf("record_approval = %v %q, want status recorded, recorded true, an empty confirmed_by, turn %q and a text naming %q", rec, text, "4", "One approval covers")
	}
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": r["request_id"]}); be.Kind != bot.KindConflict {
		t.Fatalf("approving a recorded consent: %v (kind %d), want KindConflict", be, be.Kind)
	}
	// record_approval alone records a new consent and shows it.
	solo, _ := e.ok(agent, "record_approval", with(map[string]any{"action": "push to main"}))
	if solo["status"] != "recorded" || solo["request_id"] == r["request_id"] {
		t.Fatalf("solo record = %v, want status recorded and a new request_id (not %v)", solo, r["request_id"])
	}
	other := e.principal("other", policy.RoleAgent, "agent")
	r2, _ := e.ok(agent, "request_approval", with(map[string]any{"action": "publish the release", "question": "Publish v2 now?"}))
	if be := e.fail(other, "record_approval", with(map[string]any{"action": "publish the release", "request_id": r2["request_id"]})); be.Kind != bot.KindDenied {
		t.Fatalf("another agent recording: %v (kind %d), want KindDenied", be, be.Kind)
	}
	// A person approves a consent request in chat.
	res, err := e.b.DecideItem(context.Background(), alice, uint64(r2["item_id"].(float64)), true, "", nil)
	if err != nil || asMap(t, res.Data)["status"] != "approved" || asMap(t, res.Data)["confirmed_by"] != "alice ["+alice.ID+"]" {
		t.Fatalf("chat consent = %v, %v, want status approved, confirmed_by %q and no error", res, err, "alice ["+alice.ID+"]")
	}
	if be := e.fail(agent, "request_approval", with(map[string]any{"action": " "})); be.Field != "action" {
		t.Fatalf("empty action: %v, want an error on field action", be)
	}
}

func TestItemViews(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", map[string]any{
		"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "summary": "Roll back to v41",
		"category": "mutating", "requested_effects": []string{"redeploy 12 hosts", "restart workers"}, "dry_run": "12 hosts to v41",
	})
	id := uint64(d["item_id"].(float64))
	it, err := e.b.Items().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// The card talks to the person clicking: the agent's summary first,
	// what approving does (computed, not the agent's words), why they
	// are asked, the arguments as a list, the danger; the developer
	// detail is folded under Details.
	fields, details := map[string]string{}, map[string]string{}
	for _, f := range it.Fields {
		fields[f.Label] = f.Value
	}
	for _, f := range it.Details {
		details[f.Label] = f.Value
	}
	want := map[string]string{"Dry-run plan": "12 hosts to v41", "Effects the agent expects": "redeploy 12 hosts; restart workers"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("field %q = %q, want %q", k, fields[k], v)
		}
	}
	wantDetails := map[string]string{
		"Tool": "rollback_production", "Arguments (JSON)": `{"to":"v41"}`, "Category stated by the agent": "mutating",
		"Configured": "category destructive, mechanics dry_run_confirm", "Approvals": "0 of 2 approvals (quorum 2)",
		"Requested by": "deploy-bot [" + agent.ID + "]", "Request": d["request_id"].(string), "Channel": "default",
	}
	for k, v := range wantDetails {
		if details[k] != v {
			t.Errorf("detail %q = %q, want %q", k, details[k], v)
		}
	}
	if details["Arguments SHA-256"] != d["args_sha256"] {
		t.Errorf("detail Arguments SHA-256 = %q, want %v", details["Arguments SHA-256"], d["args_sha256"])
	}
	for _, f := range append(slices.Clone(it.Fields), it.Args...) {
		if strings.Contains(f.Value, agent.ID) || strings.Contains(f.Value, "sha") || strings.HasPrefix(f.Value, "{") {
			t.Errorf("a developer string on the card, outside Details: %s = %q", f.Label, f.Value)
		}
	}
	if it.Title != "Roll back to v41" {
		t.Errorf("title %q, want the agent's summary", it.Title)
	}
	if want := "Once 2 different people have approved (0 so far), deploy-bot runs rollback_production once with these arguments, as the dry run describes, within 1 hour of the approval."; it.Effect != want {
		t.Errorf("effect %q\nwant   %q", it.Effect, want)
	}
	if want := "rollback_production is configured as destructive, so a person reviews its dry run and approves every call, 2 different people; only role member may approve."; it.Asked != want {
		t.Errorf("asked %q\nwant  %q", it.Asked, want)
	}
	if len(it.Args) != 1 || it.Args[0] != (bot.Field{Label: "to", Value: "v41"}) {
		t.Errorf("args %+v, want to: v41", it.Args)
	}
	if it.Danger == nil || it.Danger.Target != "v41" || it.Danger.TargetLabel != "to" || !strings.Contains(it.Danger.Warning, "cannot be undone") || it.Danger.Confirm != "rollback_production runs once on to v41 and cannot be undone." {
		t.Errorf("danger = %+v, want target v41 labelled to, a warning naming %q and confirm %q", it.Danger, "cannot be undone", "rollback_production runs once on to v41 and cannot be undone.")
	}
	if it.Kind != bot.KindAction || it.Status != "pending" || it.Tally != "0 of 2 approvals" || it.Requester != "deploy-bot ["+agent.ID+"]" || it.ExpiresAt.IsZero() || it.Channel != "default" {
		t.Fatalf("item = %+v, want kind action, status pending, tally %q, requester %q, an expiry and channel default", it, "0 of 2 approvals", "deploy-bot ["+agent.ID+"]")
	}
	e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"]})
	if it, _ := e.b.Items().Get(context.Background(), id); it.Tally != "1 of 2 approvals: alice" || it.Status != "pending" {
		t.Fatalf("after one approval: item = %+v, want tally %q and status pending", it, "1 of 2 approvals: alice")
	}
	// The tool's first channel, and its sensitivity.
	s, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "create_server", "arguments": map[string]any{"region": "eu", "size": "small"}})
	if it, _ := e.b.Items().Get(context.Background(), uint64(s["item_id"].(float64))); !it.Sensitive {
		t.Fatalf("sensitive tool: item = %+v, want it marked Sensitive", it)
	}
	dd, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	if it, _ := e.b.Items().Get(context.Background(), uint64(dd["item_id"].(float64))); it.Channel != "ops" {
		t.Fatalf("channel %q, want ops", it.Channel)
	}
	q, _ := e.ok(agent, "ask_user", map[string]any{"question": "Which?", "options": []string{"a", "b"}, "multi": true})
	if it, _ := e.b.Items().Get(context.Background(), uint64(q["item_id"].(float64))); it.Kind != bot.KindQuestion || !it.Multi || !slices.Equal(it.Options, []string{"a", "b"}) || it.Title != "Which?" {
		t.Fatalf("question item = %+v, want kind question, multi, options [a b] and title %q", it, "Which?")
	}
	src := itemSource{e.s}
	for _, tt := range []struct {
		kind    bot.ItemKind
		approve bool
		tool    string
	}{{bot.KindAction, true, "approve_action"}, {bot.KindAction, false, "deny_action"}, {bot.KindConsent, true, "approve_action"}, {bot.KindQuestion, true, "answer_question"}, {bot.KindQuestion, false, "answer_question"}} {
		tool, args, err := src.DecisionCall(bot.ItemRecord{ID: 1, Kind: tt.kind, Key: "req_x"}, tt.approve, "why", []string{"a"})
		if err != nil || tool != tt.tool || args["request_id"] != "req_x" {
			t.Fatalf("DecisionCall(%s, %v) = %s %v %v, want %s with request_id req_x and no error", tt.kind, tt.approve, tool, args, err, tt.tool)
		}
	}
	if _, _, err := src.DecisionCall(bot.ItemRecord{Kind: bot.KindMemoryChange}, true, "", nil); err == nil {
		t.Fatal("a memory item mapped to an action tool")
	}
}
