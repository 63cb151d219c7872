package actiontools

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

func TestConfirmMechanicsComeFromConfig(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	tests := []struct {
		name      string
		args      map[string]any
		status    string
		mechanics string
		category  string
		command   string
	}{
		{"read-only is auto", map[string]any{"tool": "read_logs", "arguments": map[string]any{"service": "web"}}, "approved", "auto", "read-only", ""},
		{"mutating is confirm", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}}, "pending", "confirm", "mutating", ""},
		{"destructive is dry run + confirm", destroyArgs(nil), "pending", "dry_run_confirm", "destructive", ""},
		{"an undeclared tool is confirm", map[string]any{"tool": "format_disk"}, "pending", "confirm", "unclassified", ""},
		{"an undeclared get_ tool is confirm while the prefix rule is off", map[string]any{"tool": "get_weather"}, "pending", "confirm", "unclassified", ""},
		{"the agent's category is recorded, not trusted", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "category": "read-only"}, "pending", "confirm", "mutating", ""},
		{"an allowlisted read-only command is auto", map[string]any{"tool": "exec", "arguments": map[string]any{"command": "kubectl get pods -n prod"}}, "approved", "auto", "read-only", "kubectl get"},
		{"an argv command", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "rollout", "restart", "deploy/web"}}}, "pending", "confirm", "mutating", "kubectl rollout restart"},
		{"a destructive command", map[string]any{"tool": "exec", "arguments": map[string]any{"command": "kubectl delete pod web-1"}, "dry_run": "pod web-1 in prod is deleted"}, "pending", "dry_run_confirm", "destructive", "kubectl delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, text := e.ok(agent, "confirm_action", tt.args)
			if d["status"] != tt.status || d["mechanics"] != tt.mechanics || d["category"] != tt.category {
				t.Fatalf("status %v mechanics %v category %v; want %s %s %s\n%s", d["status"], d["mechanics"], d["category"], tt.status, tt.mechanics, tt.category, text)
			}
			if tt.command != "" && d["command"] != tt.command {
				t.Fatalf("command %v, want %s", d["command"], tt.command)
			}
			if d["confirmed_by"] != "" {
				t.Fatalf("confirmed_by = %q before any person decided, want empty", d["confirmed_by"])
			}
			if !regexp.MustCompile(`^req_[0-9a-f]{16}$`).MatchString(d["request_id"].(string)) {
				t.Fatalf("request_id = %v, want it to match %s", d["request_id"], `^req_[0-9a-f]{16}$`)
			}
			if len(d["args_sha256"].(string)) != 64 {
				t.Fatalf("args_sha256 = %v, want 64 characters", d["args_sha256"])
			}
			if tt.status == "pending" && (d["item_id"] == nil || d["expires_at"] == nil) {
				t.Fatalf("a pending request without an item or deadline: %v", d)
			}
			if tt.status == "approved" && d["item_id"] != nil {
				t.Fatalf("an auto-approved request was posted to chat: %v", d)
			}
		})
	}
	if n := len(e.events("slack", bot.EventCreated)); n != 7 {
		t.Fatalf("%d chat items created, want one per pending request (7)", n)
	}

	prefixed := newEnv(t, Options{ReadOnlyPrefixes: true})
	pa := prefixed.principal("a", policy.RoleAgent, "agent")
	if d, _ := prefixed.ok(pa, "confirm_action", map[string]any{"tool": "get_weather"}); d["mechanics"] != "auto" {
		t.Fatalf("with read_only_prefixes, get_weather is %v, want auto", d["mechanics"])
	}
	if d, _ := prefixed.ok(pa, "confirm_action", map[string]any{"tool": "drop_weather"}); d["mechanics"] != "confirm" {
		t.Fatalf("with read_only_prefixes, drop_weather is %v, want confirm", d["mechanics"])
	}
}

func TestConfirmRefusals(t *testing.T) {
	e := newEnv(t, Options{CallbackHosts: []string{"127.0.0.1"}})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")

	// Missing required parameters: no request, the seed's answer, schema order.
	d, text := e.ok(agent, "confirm_action", map[string]any{"tool": "create_server", "arguments": map[string]any{"name": "x"}})
	if text != "REQUIRES_CLARIFICATION: Missing required parameters: region, size" || d["status"] != "requires_clarification" || !slices.Equal(toStrings(d["missing"]), []string{"region", "size"}) || d["request_id"] != "" {
		t.Fatalf("clarification = %q %v, want %q, status requires_clarification, missing [region size] and an empty request_id", text, d, "REQUIRES_CLARIFICATION: Missing required parameters: region, size")
	}
	if _, text := e.ok(agent, "confirm_action", map[string]any{"tool": "create_server", "arguments": map[string]any{"size": "small", "region": "  "}}); text != "REQUIRES_CLARIFICATION: Missing required parameters: region" {
		t.Fatalf("blank region: %q, want %q", text, "REQUIRES_CLARIFICATION: Missing required parameters: region")
	}
	if _, text := e.ok(agent, "confirm_action", map[string]any{"tool": "delete_database"}); text != "REQUIRES_CLARIFICATION: Missing required parameters: db_name" {
		t.Fatalf("no arguments: %q, want %q", text, "REQUIRES_CLARIFICATION: Missing required parameters: db_name")
	}
	if _, text := e.ok(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{}}); text != "REQUIRES_CLARIFICATION: Missing required parameters: command" {
		t.Fatalf("exec without a command: %q, want %q", text, "REQUIRES_CLARIFICATION: Missing required parameters: command")
	}
	if n := len(e.events("slack", bot.EventCreated)); n != 0 {
		t.Fatalf("a clarification created %d chat items, want 0", n)
	}

	// The rest of the schema is validated.
	if be := e.fail(agent, "confirm_action", map[string]any{"tool": "create_server", "arguments": map[string]any{"region": "eu", "size": "huge"}}); be.Kind != bot.KindInvalid || be.Field != "arguments" {
		t.Fatalf("schema violation: %v (kind %d), want KindInvalid on field arguments", be, be.Kind)
	}
	// A destructive request without a plan: 400 naming dry_run.
	noPlan := destroyArgs(nil)
	delete(noPlan, "dry_run")
	if be := e.fail(agent, "confirm_action", noPlan); be.Kind != bot.KindInvalid || be.Field != "dry_run" || !strings.Contains(be.Msg, "dry-run plan") {
		t.Fatalf("no dry run: %v (kind %d), want KindInvalid on field dry_run naming %q", be, be.Kind, "dry-run plan")
	}
	// An exec command not on the allowlist: refused outright, audited.
	be := e.fail(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": "rm -rf /var/lib/postgresql"}})
	if be.Kind != bot.KindDenied || !strings.HasPrefix(be.Msg, "Access denied: \"rm -rf\" is not on the command allowlist of exec") || !strings.Contains(be.Msg, "kubectl delete (destructive)") || !strings.Contains(be.Msg, "tools[].commands") {
		t.Fatalf("not allowlisted: %v (kind %d), want KindDenied starting %q and naming %q and %q", be, be.Kind, "Access denied: \"rm -rf\" is not on the command allowlist of exec", "kubectl delete (destructive)", "tools[].commands")
	}
	if got := e.audits("access_denied"); len(got) != 1 || !strings.Contains(got[0].Detail, "not on the command allowlist") {
		t.Fatalf("the refusal was not audited: %+v, want one access_denied entry naming %q", got, "not on the command allowlist")
	}
	for _, cmd := range []any{"kubectl get pods; rm -rf /", "kubectl get $(id)", 7} {
		if be := e.fail(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": cmd}}); be.Kind != bot.KindInvalid || be.Field != "arguments.command" {
			t.Fatalf("command %v: %v (kind %d), want KindInvalid on field arguments.command", cmd, be, be.Kind)
		}
	}
	// Bad shapes never reach the handler as a 500.
	for _, bad := range []struct {
		args  any
		field string
	}{
		{map[string]any{"tool": "read_logs", "arguments": "db=prod"}, "arguments"},
		{map[string]any{"tool": ""}, "tool"},
		{map[string]any{"tool": "read logs"}, "tool"},
		{map[string]any{"tool": "read_logs", "confirmed_by": "alice"}, "confirmed_by"},
		{map[string]any{"tool": "read_logs", "action_id": "a b"}, "action_id"},
	} {
		if be := e.fail(agent, "confirm_action", bad.args); be.Kind != bot.KindInvalid || be.Field != bad.field {
			t.Fatalf("%v: %v, want 400 on %s", bad.args, be, bad.field)
		}
	}
	// Callbacks: refused without a secret, and to a host not allowed.
	if be := e.fail(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": "http://127.0.0.1:9/cb"})); be.Kind != bot.KindInvalid || be.Field != "callback_url" || !strings.Contains(be.Msg, "rotate-callback-secret --name deploy-bot") {
		t.Fatalf("callback without a secret: %v (kind %d), want KindInvalid on field callback_url naming %q", be, be.Kind, "rotate-callback-secret --name deploy-bot")
	}
	signed := newEnv(t, Options{CallbackSecret: []byte("0123456789abcdef0123"), CallbackHosts: []string{"127.0.0.1:9", "https://agent.example/cb/"}})
	sa := signed.principal("a", policy.RoleAgent, "agent")
	for _, u := range []string{"http://10.0.0.1/cb", "ftp://127.0.0.1/cb", "http://user:pw@127.0.0.1/cb", "/cb", "http://127.0.0.1.evil.example/cb",
		"http://127.0.0.1/cb", "http://127.0.0.1:10/cb", "http://agent.example/cb/x", "https://agent.example/cbx", "https://agent.example:8443/cb/x", "https://agent.example/cb/../admin"} {
		if be := signed.fail(sa, "confirm_action", destroyArgs(map[string]any{"callback_url": u})); be.Kind != bot.KindInvalid || be.Field != "callback_url" {
			t.Fatalf("callback_url %s: %v (kind %d), want KindInvalid on field callback_url", u, be, be.Kind)
		}
	}
	signed.ok(sa, "confirm_action", destroyArgs(map[string]any{"callback_url": "http://127.0.0.1:9/cb"}))
	signed.ok(sa, "confirm_action", destroyArgs(map[string]any{"callback_url": "https://agent.example/cb/done", "action_id": "second"}))
}

func TestHeadlessIsDeniedByAutomaticPolicy(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("nightly", policy.RoleAgent, "agent")
	tests := []struct {
		args map[string]any
		word string
	}{
		{destroyArgs(map[string]any{"headless": true}), "destructive"},
		{map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "prod"}, "headless": true}, "destructive"},
		{map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "headless": true}, "mutating"},
		{map[string]any{"tool": "format_disk", "headless": true}, "unclassified"},
	}
	for _, tt := range tests {
		d, text := e.ok(agent, "confirm_action", tt.args)
		want := "denied by automatic policy: " + tt.word + " action requires explicit human confirmation"
		if d["status"] != "denied" || d["reason"] != want || d["confirmed_by"] != "" || !strings.Contains(text, want) {
			t.Fatalf("%v: %v %q, want status denied, an empty confirmed_by and reason %q, in the text too", tt.args["tool"], d, text, want)
		}
	}
	if d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "read_logs", "headless": true}); d["status"] != "approved" {
		t.Fatalf("headless read-only = %v, want status approved", d)
	}
	if n := len(e.events("slack", bot.EventCreated)); n != 0 {
		t.Fatalf("headless requests posted %d chat items, want 0", n)
	}
	if got := e.audits("action_denied_automatic"); len(got) != 4 {
		t.Fatalf("%d automatic denials audited, want 4", len(got))
	}
}

func TestActionIDIdempotency(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	other := e.principal("other-bot", policy.RoleAgent, "agent")
	args := destroyArgs(map[string]any{"action_id": "delete_db_prod"})
	first, _ := e.ok(agent, "confirm_action", args)
	again, text := e.ok(agent, "confirm_action", args)
	if again["request_id"] != first["request_id"] || !strings.Contains(text, "Same action_id") {
		t.Fatalf("same body: request_id %v vs %v, text %q; want the same request and a text naming %q", again["request_id"], first["request_id"], text, "Same action_id")
	}
	// Key order of arguments does not matter; the body is compared as JSON.
	reordered := destroyArgs(map[string]any{"action_id": "delete_db_prod", "arguments": map[string]any{"db_name": "prod"}})
	if d, _ := e.ok(agent, "confirm_action", reordered); d["request_id"] != first["request_id"] {
		t.Fatalf("same body again: request_id %v, want %v", d["request_id"], first["request_id"])
	}
	changed := destroyArgs(map[string]any{"action_id": "delete_db_prod", "arguments": map[string]any{"db_name": "staging"}})
	be := e.fail(agent, "confirm_action", changed)
	if be.Kind != bot.KindConflict || be.Field != "action_id" || asMap(t, be.Data)["request_id"] != first["request_id"] {
		t.Fatalf("different body: %v %v (kind %d), want KindConflict on field action_id with request_id %v", be, be.Data, be.Kind, first["request_id"])
	}
	// Keys are per requester: another agent's key is its own.
	if d, _ := e.ok(other, "confirm_action", args); d["request_id"] == first["request_id"] {
		t.Fatal("another agent's action_id reached the first agent's request")
	}
	// After a decision, the same key and body return the decided request.
	member := e.principal("alice", policy.RoleMember, "person")
	e.ok(member, "approve_action", map[string]any{"request_id": first["request_id"]})
	if d, _ := e.ok(agent, "confirm_action", args); d["status"] != "approved" || d["request_id"] != first["request_id"] {
		t.Fatalf("after approval = %v, want status approved and request_id %v", d, first["request_id"])
	}
	if n := len(e.events("slack", bot.EventCreated)); n != 2 {
		t.Fatalf("%d items created, want 2 (one per distinct request)", n)
	}
}

func TestApprovalIsBoundToTheExactCall(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	a, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"arguments": map[string]any{"db_name": "prod", "n": json.Number("12345678901234567890")}}))
	b, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"arguments": map[string]any{"n": json.Number("12345678901234567890"), "db_name": "prod"}}))
	c, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"arguments": map[string]any{"db_name": "prod", "n": json.Number("12345678901234567891")}}))
	if a["args_sha256"] != b["args_sha256"] || a["args_sha256"] == c["args_sha256"] {
		t.Fatalf("hashes: %v %v %v, want the first two equal and the third different", a["args_sha256"], b["args_sha256"], c["args_sha256"])
	}
	r := e.request(a["request_id"].(string))
	if string(r.Action.Arguments) != `{"db_name":"prod","n":12345678901234567890}` {
		t.Fatalf("stored arguments %s: a large number lost precision, want %s", r.Action.Arguments, `{"db_name":"prod","n":12345678901234567890}`)
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			s, _ := x.(string)
			out = append(out, s)
		}
	}
	return out
}
