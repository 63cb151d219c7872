package actiontools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// grantTools is testTools with grants on restart_service (8h, every kind)
// and on exec (session only).
func grantTestTools() []ToolSpec {
	ts := testTools()
	for i := range ts {
		switch ts[i].Name {
		case "restart_service":
			ts[i].Grants = GrantPolicy{Max: 8 * time.Hour, Allow: []string{"once", "session", "duration"}}
		case "create_server":
			ts[i].Grants = GrantPolicy{Max: 2 * time.Hour, Allow: []string{"duration"}}
		}
	}
	return ts
}

type grantEnv struct {
	*env
	agent, alice, bob, viewer *bot.Caller
}

func newGrantEnv(t *testing.T) grantEnv {
	e := newEnv(t, Options{Tools: grantTestTools()})
	return grantEnv{env: e,
		agent:  e.principal("deploy-bot", policy.RoleAgent, "agent"),
		alice:  e.principal("alice", policy.RoleMember, "person"),
		bob:    e.principal("bob", policy.RoleMember, "person", "ward9"),
		viewer: e.principal("vera", policy.RoleViewer, "person"),
	}
}

func restartCall(service, run string) map[string]any {
	return map[string]any{"user_id": "ward7", "agent_id": "deployer", "run_id": run,
		"tool": "restart_service", "arguments": map[string]any{"service": service, "reason": "oom"}}
}

// TestGrantSessionApprovesAndRevokes: a session grant made with an
// approval approves the agent's next identical calls at once, naming the
// grant and the person, with a receipt that carries the grant; other runs,
// arguments and agents still wait; a revocation stops it at once.
func TestGrantSessionApprovesAndRevokes(t *testing.T) {
	e := newGrantEnv(t)
	first, _ := e.ok(e.agent, "confirm_action", restartCall("payments", "run-1"))
	reqID := first["request_id"].(string)
	if first["status"] != "pending" {
		t.Fatalf("first call: %v, want pending", first["status"])
	}
	d, text := e.ok(e.alice, "approve_action", map[string]any{"request_id": reqID, "grant": map[string]any{"kind": "session"}})
	g, _ := d["grant"].(map[string]any)
	if d["status"] != "approved" || g == nil || g["name"] != "grant #1" || !strings.Contains(text, "grant #1") {
		t.Fatalf("approval with grant: %s %v, want status approved and grant #1, named in the text too", text, d)
	}
	// The grant being made is posted in the original card's thread, as
	// its uses are.
	made := e.events("slack", bot.EventNote)
	if len(made) != 1 || made[0].ItemID == 0 || made[0].Note != "alice granted #1: session, same arguments, until "+e.clock.Now().Add(8*time.Hour).UTC().Format("15:04")+" UTC." {
		t.Fatalf("thread note of the grant made: %+v, want 1 note on the card: %q", made, "alice granted #1: session, same arguments, until "+e.clock.Now().Add(8*time.Hour).UTC().Format("15:04")+" UTC.")
	}
	want := "grant #1 by alice [" + e.alice.ID + "]"
	for i := range 3 {
		e.clock.Advance(time.Minute)
		got, _ := e.ok(e.agent, "confirm_action", restartCall("payments", "run-1"))
		if got["status"] != "approved" || got["confirmed_by"] != want || got["grant_id"] != float64(1) {
			t.Fatalf("call %d under the grant: %v, want status approved, confirmed_by %q and grant_id 1", i+1, got, want)
		}
		p, err := receipt.Verify(got["receipt"].(string), e.b.PublicKey(), e.clock.Now())
		if err != nil || p.Grant != "grant #1" || p.ConfirmedBy != want {
			t.Fatalf("receipt: %+v %v, want grant %q, confirmed by %q and no error", p, err, "grant #1", want)
		}
	}
	if n := len(e.audits("action_approved_by_grant")); n != 3 {
		t.Fatalf("%d action_approved_by_grant entries, want 3", n)
	}
	if n := len(e.events("slack", bot.EventNote)); n != 4 {
		t.Fatalf("%d thread notes on the original card, want 4 (made, 3 uses)", n)
	}
	for name, call := range map[string]map[string]any{
		"another run":     restartCall("payments", "run-2"),
		"other arguments": restartCall("billing", "run-1"),
	} {
		if got, _ := e.ok(e.agent, "confirm_action", call); got["status"] != "pending" {
			t.Fatalf("%s: %v, want pending", name, got["status"])
		}
	}
	other := e.principal("other-bot", policy.RoleAgent, "agent")
	if got, _ := e.ok(other, "confirm_action", restartCall("payments", "run-1")); got["status"] != "pending" {
		t.Fatalf("another agent: %v, want pending", got["status"])
	}

	// The agent sees its grant; it cannot revoke it.
	l, _ := e.ok(e.agent, "list_grants", map[string]any{})
	if gs := l["grants"].([]any); len(gs) != 1 {
		t.Fatalf("the agent lists %d grants, want 1", len(gs))
	}
	if l, _ := e.ok(other, "list_grants", map[string]any{}); len(l["grants"].([]any)) != 0 {
		t.Fatalf("another agent sees grants: %v, want none", l)
	}
	if be := e.fail(e.agent, "revoke_grant", map[string]any{"grant_id": 1}); be.Kind != bot.KindDenied {
		t.Fatalf("agent revoke: %v (kind %d), want KindDenied", be, be.Kind)
	}
	// bob's scope is ward9: the grant is not his to see.
	if be := e.fail(e.bob, "revoke_grant", map[string]any{"grant_id": 1}); be.Kind != bot.KindNotFound {
		t.Fatalf("out-of-scope revoke: %v (kind %d), want KindNotFound", be, be.Kind)
	}
	if _, text := e.ok(e.alice, "revoke_grant", map[string]any{"grant_id": 1, "reason": "done"}); !strings.Contains(text, "Revoked grant #1") {
		t.Fatalf("revoke: %s, want it to contain %q", text, "Revoked grant #1")
	}
	if got, _ := e.ok(e.agent, "confirm_action", restartCall("payments", "run-1")); got["status"] != "pending" {
		t.Fatalf("after revocation: %v, want pending", got["status"])
	}
	if l, _ := e.ok(e.alice, "list_grants", map[string]any{}); len(l["grants"].([]any)) != 0 {
		t.Fatalf("a revoked grant is listed as live: %v, want none", l)
	}
	if n := len(e.audits("grant_created", "grant_revoked")); n != 2 {
		t.Fatalf("%d grant_created/grant_revoked entries, want 2", n)
	}
}

// TestGrantExpiryAndOnce: a duration grant stops at its expiry; a once
// grant approves one call; a match grant approves other values of the
// free arguments only.
func TestGrantExpiryAndOnce(t *testing.T) {
	e := newGrantEnv(t)
	approve := func(service string, grant map[string]any) {
		t.Helper()
		d, _ := e.ok(e.agent, "confirm_action", restartCall(service, "run-1"))
		e.ok(e.alice, "approve_action", map[string]any{"request_id": d["request_id"], "grant": grant})
	}
	status := func(service, run string) string {
		t.Helper()
		d, _ := e.ok(e.agent, "confirm_action", restartCall(service, run))
		return d["status"].(string)
	}
	approve("payments", map[string]any{"kind": "duration", "for": "1h"})
	e.clock.Advance(59 * time.Minute)
	if s := status("payments", "run-7"); s != "approved" {
		t.Fatalf("inside the hour, another run: %s, want approved", s)
	}
	headless := restartCall("payments", "run-8")
	headless["headless"] = true
	if d, _ := e.ok(e.agent, "confirm_action", headless); d["status"] != "approved" {
		t.Fatalf("a headless call under the grant: %v, want approved", d["status"])
	}
	e.clock.Advance(time.Minute)
	if d, _ := e.ok(e.agent, "confirm_action", headless); d["status"] != "denied" {
		t.Fatalf("a headless call after the grant expired: %v, want denied", d["status"])
	}
	if s := status("payments", "run-7"); s != "pending" {
		t.Fatalf("at the expiry: %s, want pending", s)
	}
	approve("search", map[string]any{"kind": "once"})
	if s := status("search", "run-1"); s != "approved" {
		t.Fatalf("the once grant's call: %s, want approved", s)
	}
	if s := status("search", "run-1"); s != "pending" {
		t.Fatalf("after the once grant was used: %s, want pending", s)
	}
	// A constraint: the same service, any reason.
	d, _ := e.ok(e.agent, "confirm_action", restartCall("ledger", "run-1"))
	e.ok(e.alice, "approve_action", map[string]any{"request_id": d["request_id"], "grant": map[string]any{"kind": "session", "match": map[string]any{"service": "ledger"}}})
	call := restartCall("ledger", "run-1")
	call["arguments"] = map[string]any{"service": "ledger", "reason": "deploy"}
	if got, _ := e.ok(e.agent, "confirm_action", call); got["status"] != "approved" {
		t.Fatalf("another reason under a service constraint: %v, want approved", got["status"])
	}
}

// TestGrantRefusals: a grant is refused wherever approving is, and beyond
// the tool's limits; a refused grant records no approval either.
func TestGrantRefusals(t *testing.T) {
	e := newGrantEnv(t)
	pending := func(args map[string]any) string {
		t.Helper()
		d, _ := e.ok(e.agent, "confirm_action", args)
		return d["request_id"].(string)
	}
	id := pending(restartCall("payments", "run-1"))
	noRun := pending(restartCall("payments", ""))
	destroy := pending(destroyArgs(map[string]any{"user_id": "ward7"}))
	server := pending(map[string]any{"user_id": "ward7", "tool": "create_server", "arguments": map[string]any{"region": "eu", "size": "small"}})
	tests := []struct {
		name   string
		caller *bot.Caller
		args   map[string]any
		kind   bot.Kind
		says   string
	}{
		{"destructive tool", e.alice, map[string]any{"request_id": destroy, "grant": map[string]any{"kind": "once"}}, bot.KindInvalid, "destructive"},
		{"beyond the max", e.alice, map[string]any{"request_id": id, "grant": map[string]any{"kind": "duration", "for": "9h"}}, bot.KindInvalid, "grants.max is 8h"},
		{"duration without for", e.alice, map[string]any{"request_id": id, "grant": map[string]any{"kind": "duration"}}, bot.KindInvalid, "required"},
		{"kind not allowed", e.alice, map[string]any{"request_id": server, "grant": map[string]any{"kind": "session"}}, bot.KindInvalid, "allows: duration"},
		{"tool without grants", e.alice, map[string]any{"request_id": destroy, "grant": map[string]any{"kind": "always"}}, bot.KindInvalid, "once, session or duration"},
		{"session without run", e.alice, map[string]any{"request_id": noRun, "grant": map[string]any{"kind": "session"}}, bot.KindInvalid, "run_id"},
		{"match of another value", e.alice, map[string]any{"request_id": id, "grant": map[string]any{"kind": "once", "match": map[string]any{"service": "billing"}}}, bot.KindInvalid, "repeats the value"},
		{"match of a missing argument", e.alice, map[string]any{"request_id": id, "grant": map[string]any{"kind": "once", "match": map[string]any{"region": "eu"}}}, bot.KindInvalid, "no argument"},
		{"with an edit", e.alice, map[string]any{"request_id": id, "arguments": map[string]any{"service": "payments", "reason": "edited"}, "grant": map[string]any{"kind": "once"}}, bot.KindInvalid, "not with an edit"},
		{"with a denial", e.alice, map[string]any{"request_id": id, "reason": "no", "grant": map[string]any{"kind": "once"}}, bot.KindInvalid, "only with an approval"},
		{"an agent key", e.agent, map[string]any{"request_id": id, "grant": map[string]any{"kind": "once"}}, bot.KindDenied, "approve"},
		{"a viewer", e.viewer, map[string]any{"request_id": id, "grant": map[string]any{"kind": "once"}}, bot.KindDenied, "approve"},
		{"out of scope", e.bob, map[string]any{"request_id": id, "grant": map[string]any{"kind": "once"}}, bot.KindDenied, "scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := "approve_action"
			if tt.name == "with a denial" {
				tool = "deny_action"
			}
			be := e.fail(tt.caller, tool, tt.args)
			if be.Kind != tt.kind || !strings.Contains(be.Msg, tt.says) {
				t.Fatalf("%s: %v (%s), want %v containing %q", tt.name, be.Kind, be.Msg, tt.kind, tt.says)
			}
			if r := e.request(tt.args["request_id"].(string)); r.Status != approvals.StatusPending {
				t.Fatalf("a refused grant left %s %s, want %s", r.ID, r.Status, approvals.StatusPending)
			}
		})
	}
	if n := len(e.audits("grant_created")); n != 0 {
		t.Fatalf("%d grants made by refused attempts, want 0", n)
	}
}

// TestGrantConfig: destructive tools and quorum tools never take grants;
// max and kinds are checked.
func TestGrantConfig(t *testing.T) {
	tests := []struct {
		spec ToolSpec
		says string
	}{
		{ToolSpec{Name: "drop", Category: "destructive", Grants: GrantPolicy{Max: time.Hour, Allow: []string{"once"}}}, "destructive tool never takes standing grants"},
		{ToolSpec{Name: "sh", Category: "mutating", Commands: []CommandSpec{{Command: "rm", Category: "destructive"}}, Grants: GrantPolicy{Max: time.Hour, Allow: []string{"once"}}}, "command \"rm\" of sh is destructive"},
		{ToolSpec{Name: "roll", Category: "mutating", Quorum: 2, Grants: GrantPolicy{Max: time.Hour, Allow: []string{"once"}}}, "quorum of 2"},
		{ToolSpec{Name: "r", Category: "mutating", Grants: GrantPolicy{Allow: []string{"once"}}}, "grants.max: required"},
		{ToolSpec{Name: "r", Category: "mutating", Grants: GrantPolicy{Max: time.Hour, Allow: []string{"forever"}}}, "grants.allow[0]"},
		{ToolSpec{Name: "r", Category: "mutating", Grants: GrantPolicy{Max: time.Hour}}, "grants.allow: list the kinds"},
	}
	for _, tt := range tests {
		_, err := compileTool(tt.spec, time.Minute, memory.Fold)
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want an error containing %q", tt.spec.Name, err, tt.says)
		}
	}
	if _, err := compileTool(ToolSpec{Name: "ok", Category: "mutating", Grants: GrantPolicy{Max: time.Hour, Allow: []string{"session"}}}, time.Minute, memory.Fold); err != nil {
		t.Fatalf("a valid grant policy: %v", err)
	}
}

// TestGrantOptionsOnItem: the item of a tool that allows grants offers
// them; a destructive item offers none.
func TestGrantOptionsOnItem(t *testing.T) {
	e := newGrantEnv(t)
	d, _ := e.ok(e.agent, "confirm_action", restartCall("payments", "run-1"))
	it, err := e.b.Items().Get(t.Context(), uint64(d["item_id"].(float64)))
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, o := range it.Grants {
		labels = append(labels, o.Kind+"/"+o.For)
	}
	if strings.Join(labels, ",") != "once/,session/,duration/1h" {
		t.Fatalf("grant options: %v, want %q", labels, "once/,session/,duration/1h")
	}
	d, _ = e.ok(e.agent, "confirm_action", destroyArgs(nil))
	it, _ = e.b.Items().Get(t.Context(), uint64(d["item_id"].(float64)))
	if len(it.Grants) != 0 {
		t.Fatalf("a destructive item offers grants: %v, want none", it.Grants)
	}
}

// TestGrantRefusedOnStepUp: a person who stepped up may approve a step-up
// request, but not with a standing grant (it would approve later calls
// without a fresh sign-in); the card offers no grants either.
func TestGrantRefusedOnStepUp(t *testing.T) {
	e := newEnv(t, Options{Tools: grantTestTools(), StepUp: StepUpSpec{Within: 5 * time.Minute, Tools: []string{"restart_service"}}})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	alice.AuthAt, alice.AuthMethod = e.clock.Now(), "oidc"
	d, _ := e.ok(agent, "confirm_action", restartCall("payments", "run-1"))
	it, err := e.b.Items().Get(t.Context(), uint64(d["item_id"].(float64)))
	if err != nil || len(it.Grants) != 0 {
		t.Fatalf("a step-up item offers grants: %v %v, want none and no error", it.Grants, err)
	}
	be := e.fail(alice, "approve_action", map[string]any{"request_id": d["request_id"], "grant": map[string]any{"kind": "session"}})
	if be.Kind != bot.KindInvalid || !strings.Contains(be.Msg, "step-up") {
		t.Fatalf("a grant on a step-up request: %v %s, want kind %v (KindInvalid) naming step-up", be.Kind, be.Msg, bot.KindInvalid)
	}
	if got, _ := e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"]}); got["status"] != "approved" {
		t.Fatalf("the stepped-up approval without a grant: %v, want approved", got["status"])
	}
}

// TestGrantSensitiveValuesWithheld: a constraint on a sensitive tool's
// argument is in the audit chain by name only, and list_grants shows its
// value only to people who may see the tool's details.
func TestGrantSensitiveValuesWithheld(t *testing.T) {
	e := newGrantEnv(t)
	d, _ := e.ok(e.agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "create_server", "arguments": map[string]any{"region": "eu-secret-1", "size": "small"}})
	e.ok(e.alice, "approve_action", map[string]any{"request_id": d["request_id"], "grant": map[string]any{"kind": "duration", "for": "1h", "match": map[string]any{"region": "eu-secret-1"}}})
	created := e.audits("grant_created")
	if len(created) != 1 || strings.Contains(created[0].Detail, "eu-secret-1") || !strings.Contains(created[0].Detail, "match on region") {
		t.Fatalf("grant_created: %+v, want 1 naming %q and not the value %q", created, "match on region", "eu-secret-1")
	}
	if _, text := e.ok(e.viewer, "list_grants", map[string]any{}); strings.Contains(text, "eu-secret-1") || !strings.Contains(text, "withheld") {
		t.Fatalf("a viewer's list: %s, want it to say %q and no %q in it", text, "withheld", "eu-secret-1")
	}
	if _, text := e.ok(e.alice, "list_grants", map[string]any{}); !strings.Contains(text, `region="eu-secret-1"`) {
		t.Fatalf("an approver's list: %s, want it to contain %s", text, `region="eu-secret-1"`)
	}
}

// TestGrantEndsWithItsMaker: a grant is its maker's standing decision, so
// it stops approving the moment the maker could no longer approve the call
// themselves: a stored principal revoked or demoted, a configured person
// removed from the directory or rescoped. Each later call waits for a
// person instead.
func TestGrantEndsWithItsMaker(t *testing.T) {
	grantBy := func(e grantEnv, maker *bot.Caller, run string) {
		t.Helper()
		first, _ := e.ok(e.agent, "confirm_action", restartCall("payments", run))
		if d, text := e.ok(maker, "approve_action", map[string]any{"request_id": first["request_id"], "grant": map[string]any{"kind": "session"}}); d["grant"] == nil {
			t.Fatalf("no grant made: %s, want a grant in the answer", text)
		}
		if got, _ := e.ok(e.agent, "confirm_action", restartCall("payments", run)); got["status"] != "approved" {
			t.Fatalf("the grant does not apply while its maker holds: %v, want approved", got["status"])
		}
	}
	pending := func(e grantEnv, run, after string) {
		t.Helper()
		if got, _ := e.ok(e.agent, "confirm_action", restartCall("payments", run)); got["status"] != "pending" {
			t.Fatalf("after %s the grant still approves: %v (confirmed_by %v), want pending", after, got["status"], got["confirmed_by"])
		}
	}
	change := func(e grantEnv, id string, edit func(*bot.Principal)) {
		t.Helper()
		err := e.b.Update(context.Background(), e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
			p, err := bot.LoadPrincipal(tx, id)
			if err != nil || p == nil {
				t.Fatalf("load principal %s = %v, %v, want a principal and no error", id, p, err)
			}
			edit(p)
			return bot.SavePrincipal(tx, *p)
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("stored principal revoked", func(t *testing.T) {
		e := newGrantEnv(t)
		grantBy(e, e.alice, "run-1")
		change(e, e.alice.ID, func(p *bot.Principal) { p.Revoked = true })
		pending(e, "run-1", "revoking its maker")
	})
	t.Run("stored principal demoted", func(t *testing.T) {
		e := newGrantEnv(t)
		grantBy(e, e.alice, "run-1")
		change(e, e.alice.ID, func(p *bot.Principal) { p.Role = policy.RoleViewer })
		pending(e, "run-1", "demoting its maker to viewer")
		// People see why it approves nothing.
		l, text := e.ok(e.agent, "list_grants", map[string]any{})
		gs := l["grants"].([]any)
		if len(gs) != 1 || gs[0].(map[string]any)["inactive"] == nil || !strings.Contains(text, "inactive: its maker may no longer approve") {
			t.Fatalf("list_grants does not say the grant is inactive: %s %v; want one grant marked inactive, the text naming %q", text, gs, "inactive: its maker may no longer approve")
		}
	})
	t.Run("stored principal rescoped", func(t *testing.T) {
		e := newGrantEnv(t)
		grantBy(e, e.alice, "run-1")
		change(e, e.alice.ID, func(p *bot.Principal) { p.Scopes = []string{"ward9"} })
		pending(e, "run-1", "narrowing its maker's scopes away from ward7")
	})
	t.Run("maker taken off the tool's approvers", func(t *testing.T) {
		e := newGrantEnv(t)
		grantBy(e, e.alice, "run-1")
		for i := range e.opts.Tools {
			if e.opts.Tools[i].Name == "restart_service" {
				e.opts.Tools[i].Approvers = approvals.Approvers{Principals: []string{"bob"}}
			}
		}
		e.restart()
		pending(e, "run-1", "a config that names only bob as approver")
	})
	t.Run("configured person removed", func(t *testing.T) {
		e := newGrantEnv(t)
		dir := func(ps ...bot.ChatPrincipal) {
			d, err := bot.NewDirectory(ps)
			if err != nil {
				t.Fatal(err)
			}
			e.b.Chat().SetDirectory(d)
		}
		dir(bot.ChatPrincipal{Name: "carol", Role: policy.RoleMember, Slack: "U0CAROL"})
		carol := e.b.Chat().Caller(bot.SurfaceSlack, "U0CAROL", nil)
		grantBy(e, carol, "run-1")
		dir(bot.ChatPrincipal{Name: "dave", Role: policy.RoleMember, Slack: "U0DAVE"})
		pending(e, "run-1", "removing its maker from the config")
	})
}

// TestCardShowsInvisibleCharactersInArguments: an agent's arguments with a
// zero-width space are shown on the card with it escaped, so the reviewer
// does not approve "pay​ments" reading "payments"; the arguments that run
// are unchanged.
func TestCardShowsInvisibleCharactersInArguments(t *testing.T) {
	e := newGrantEnv(t)
	got, _ := e.ok(e.agent, "confirm_action", restartCall("pay\u200bments", "run-1"))
	it, err := e.b.Items().Get(context.Background(), uint64(got["item_id"].(float64)))
	if err != nil {
		t.Fatal(err)
	}
	var args, list string
	for _, f := range it.Details {
		if f.Label == "Arguments (JSON)" {
			args = f.Value
		}
	}
	for _, f := range it.Args {
		list += f.Label + "=" + f.Value + ";"
	}
	if !strings.Contains(args, `pay\u200bments`) || !strings.Contains(list, `pay\u200bments`) {
		t.Fatalf("the card's arguments hide the zero-width space: %q, list %q; want %s in both", args, list, `pay\u200bments`)
	}
	if r := e.request(got["request_id"].(string)); !strings.Contains(string(r.Action.Arguments), "pay\u200bments") {
		t.Fatalf("the stored arguments changed: %s, want them to contain %q", r.Action.Arguments, "pay\u200bments")
	}
}
