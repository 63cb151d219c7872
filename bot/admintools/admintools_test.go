package admintools

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
	"github.com/countersign/countersign/policy"
)

type env struct {
	t   *testing.T
	b   *bot.Bot
	db  *bolt.DB
	key ed25519.PrivateKey
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := bottest.OpenStore(t)
	key := bottest.SigningKey()
	now := time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC)
	b := testbot.New(t, bot.Options{Store: kvtest.Twice(db), SigningKey: key, Now: func() time.Time { return now }})
	if err := Register(b); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, b: b, db: db, key: key}
}

func caller(role policy.Role, scopes ...string) *bot.Caller {
	return &bot.Caller{Principal: bot.Principal{ID: "prin_" + string(role), Name: string(role) + "-key", Role: role, Scopes: scopes}, Surface: "http"}
}

func (e *env) call(c *bot.Caller, tool string, args string) (bot.Result, error) {
	e.t.Helper()
	return e.b.Call(context.Background(), c, tool, []byte(args))
}

func (e *env) ok(c *bot.Caller, tool string, args string) bot.Result {
	e.t.Helper()
	r, err := e.call(c, tool, args)
	if err != nil {
		e.t.Fatalf("%s %s: %v", tool, args, err)
	}
	return r
}

// audit appends one entry in the space of user as the given caller.
func (e *env) audit(c *bot.Caller, user, action, detail string) {
	e.t.Helper()
	err := e.b.Update(context.Background(), e.b.SystemCall(e.b.Now()), func(tx *bot.Tx) error {
		_, err := tx.AuditAs(c.String(), bot.Space{UserID: user}, action, detail)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestCreatePrincipal(t *testing.T) {
	e := newEnv(t)
	admin := caller(policy.RoleAdmin)
	r := e.ok(admin, "create_principal", `{"name":"support-bot","role":"agent","scopes":"patient_42, patient_7"}`)
	v := r.Data.(PrincipalView)
	want := fmt.Sprintf("Created principal %s 'support-bot' (role: agent, kind: agent, scopes: patient_42,patient_7).\n  API key (shown once — save it now):\n  %s\n  Callback signing secret (shown once; verifies the callbacks of its requests):\n  %s", v.ID, v.Key.Reveal(), v.CallbackSecret.Reveal())
	if !strings.HasPrefix(v.CallbackSecret.Reveal(), "whsec_") {
		t.Fatalf("callback secret %q, want it to start with %q", v.CallbackSecret.Reveal(), "whsec_")
	}
	if r.Text != want {
		t.Fatalf("text:\n%s\nwant:\n%s", r.Text, want)
	}
	if !regexp.MustCompile(`^prin_[0-9a-f]{12}$`).MatchString(v.ID) || v.Role != "agent" || v.Kind != "agent" || strings.Join(v.Scopes, ",") != "patient_42,patient_7" {
		t.Fatalf("data = %+v; want an id of prin_ and 12 hex digits, role and kind agent, scopes %q", v, "patient_42,patient_7")
	}
	// The key works, with the role and scopes given.
	got, err := e.b.Authenticate(context.Background(), v.Key.Reveal())
	if err != nil || got.ID != v.ID || got.Role != policy.RoleAgent || len(got.Scopes) != 2 {
		t.Fatalf("authenticate: %+v, %v; want %s, role agent, 2 scopes", got, err, v.ID)
	}
	// The key never reaches a log line through %v or slog.
	if s := fmt.Sprintf("%v %s", v.Key, v.Key); strings.Contains(s, "cs_sk_") {
		t.Fatalf("secret printed: %s; want no %q in it", s, "cs_sk_")
	}
	// Defaults: role member, kind person (a member is a person), no scopes.
	r = e.ok(admin, "create_principal", `{"name":"dr_smith"}`)
	if v := r.Data.(PrincipalView); v.Role != "member" || v.Kind != "person" || len(v.Scopes) != 0 || !strings.Contains(r.Text, "(role: member, kind: person).") {
		t.Fatalf("defaults: %+v %q; want role member, kind person, no scopes, text with %q", v, r.Text, "(role: member, kind: person).")
	}
	// A scope list that names nobody is refused, never read as "all".
	for _, sc := range []string{",,", " , ", "  "} {
		_, err := e.call(admin, "create_principal", `{"name":"w","role":"agent","scopes":"`+sc+`"}`)
		if bot.KindOf(err) != bot.KindInvalid || !strings.Contains(err.Error(), "names no user_id") {
			t.Fatalf("scopes %q: %v, want a KindInvalid error saying %q", sc, err, "names no user_id")
		}
	}
	// Case is folded in the role.
	if v := e.ok(admin, "create_principal", `{"name":"x","role":"Viewer","kind":"service"}`).Data.(PrincipalView); v.Role != "viewer" || v.Kind != "service" {
		t.Fatalf("folded role: %+v; want role viewer, kind service", v)
	}
}

func TestCreatePrincipalRejectsBadArguments(t *testing.T) {
	e := newEnv(t)
	admin := caller(policy.RoleAdmin)
	tests := []struct {
		args, field, msg string
	}{
		{`{"name":"x","role":"owner"}`, "role", "Unknown role 'owner'. Use: admin, member, agent, viewer, auditor."},
		{`{"name":"x","kind":"robot"}`, "kind", `unknown kind "robot"; use agent, person or service`},
		{`{"name":"has space"}`, "name", "may hold only letters, digits, '_', '-', '.' and ':'"},
		{`{"role":"agent"}`, "name", "required argument is missing"},
		{`{"name":"x","scopes":"ok,bad\u0001"}`, "scopes", "each user_id must be at most 128 bytes without control characters"},
		{`{"name":"x","tenant":"acme"}`, "tenant", "unknown argument; GET /v1/tools lists each tool's arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			_, err := e.call(admin, "create_principal", tt.args)
			var be *bot.Error
			if !asError(err, &be) || be.Kind != bot.KindInvalid || be.Field != tt.field || be.Msg != tt.msg {
				t.Fatalf("err = %#v, want %s: %s", err, tt.field, tt.msg)
			}
		})
	}
	// Nothing was created.
	if r := e.ok(admin, "list_principals", `{}`); r.Text != "No principals yet. Create one with create_principal." {
		t.Fatalf("list = %q, want %q", r.Text, "No principals yet. Create one with create_principal.")
	}
}

func asError(err error, target **bot.Error) bool {
	e, ok := err.(*bot.Error)
	*target = e
	return ok
}

func TestAdministrationNeedsAdmin(t *testing.T) {
	e := newEnv(t)
	for _, role := range []policy.Role{policy.RoleMember, policy.RoleAgent, policy.RoleViewer, policy.RoleAuditor} {
		for _, tool := range []string{"create_principal", "list_principals", "revoke_principal"} {
			_, err := e.call(caller(role), tool, `{"name":"x","principal_id":"prin_1"}`)
			want := fmt.Sprintf("Access denied: '%s' requires the 'admin' capability; your role(s) ['%s'] do not grant it.", tool, role)
			if bot.KindOf(err) != bot.KindDenied || err.Error() != want {
				t.Fatalf("%s by %s: %v, want a KindDenied error %q", tool, role, err, want)
			}
		}
	}
}

func TestListAndRevokePrincipals(t *testing.T) {
	e := newEnv(t)
	admin := caller(policy.RoleAdmin)
	ops := e.ok(admin, "create_principal", `{"name":"ops","role":"admin"}`).Data.(PrincipalView)
	bot1 := e.ok(admin, "create_principal", `{"name":"bot","role":"agent","scopes":"patient_42"}`).Data.(PrincipalView)

	r := e.ok(admin, "revoke_principal", fmt.Sprintf(`{"principal_id":%q}`, bot1.ID))
	if r.Text != fmt.Sprintf("Revoked %s — its API key no longer works.", bot1.ID) {
		t.Fatalf("revoke: %q, want %q", r.Text, fmt.Sprintf("Revoked %s — its API key no longer works.", bot1.ID))
	}
	if _, err := e.b.Authenticate(context.Background(), bot1.Key.Reveal()); bot.KindOf(err) != bot.KindUnauthenticated {
		t.Fatalf("revoked key still authenticates: %v, want a KindUnauthenticated error", err)
	}
	if _, err := e.b.Authenticate(context.Background(), ops.Key.Reveal()); err != nil {
		t.Fatalf("other key stopped working: %v", err)
	}
	for _, id := range []string{bot1.ID, "prin_000000000000"} {
		r = e.ok(admin, "revoke_principal", fmt.Sprintf(`{"principal_id":%q}`, id))
		if r.Text != fmt.Sprintf("No active principal %s (unknown or already revoked).", id) {
			t.Fatalf("revoke again: %q, want %q", r.Text, fmt.Sprintf("No active principal %s (unknown or already revoked).", id))
		}
	}
	if _, err := e.call(admin, "revoke_principal", `{"principal_id":"<script>"}`); bot.KindOf(err) != bot.KindInvalid {
		t.Fatalf("junk id: %v, want a KindInvalid error", err)
	}

	r = e.ok(admin, "list_principals", `{}`)
	want := fmt.Sprintf("• %s  ops  [admin]  person\n✗ %s  bot  [agent]  agent  scopes: patient_42  (disabled)", ops.ID, bot1.ID)
	if ops.ID > bot1.ID { // same creation second: ordered by id
		want = fmt.Sprintf("✗ %s  bot  [agent]  agent  scopes: patient_42  (disabled)\n• %s  ops  [admin]  person", bot1.ID, ops.ID)
	}
	if r.Text != want {
		t.Fatalf("list:\n%s\nwant:\n%s", r.Text, want)
	}
	raw, _ := json.Marshal(r.Data)
	if strings.Contains(string(raw), "cs_sk_") || !strings.Contains(string(raw), `"revoked":true`) {
		t.Fatalf("list data: %s; want %s and no %q in it", raw, `"revoked":true`, "cs_sk_")
	}

	// Creation and revocation are audited, the key never.
	var entries []approvals.Entry
	_ = e.db.View(context.Background(), func(tx kv.Tx) error {
		entries, _ = approvals.List(tx, approvals.Filter{Limit: 10})
		return nil
	})
	var actions []string
	for _, en := range entries {
		actions = append(actions, en.Action)
		if strings.Contains(en.Detail, "cs_sk_") {
			t.Fatalf("key in audit detail: %s; want no %q in it", en.Detail, "cs_sk_")
		}
	}
	if strings.Join(actions, ",") != "revoke_principal,create_principal,create_principal" {
		t.Fatalf("audited actions (newest first) = %v, want [revoke_principal create_principal create_principal]", actions)
	}
}

func TestAuditLogScope(t *testing.T) {
	e := newEnv(t)
	nurse := caller(policy.RoleMember, "patient_42")
	e.audit(nurse, "patient_42", "remember", "ADD active_medication")
	e.audit(nurse, "patient_7", "remember", "ADD allergy")
	e.audit(nurse, "", "create_principal", "line one\nline two")

	tests := []struct {
		name   string
		c      *bot.Caller
		args   string
		denied string
		count  int
	}{
		{"agent, deployment-wide", caller(policy.RoleAgent), `{}`, DenyDeploymentAudit, 0},
		{"auditor, deployment-wide", caller(policy.RoleAuditor), `{}`, "", 4}, // 3 entries + the agent's denial
		{"scoped auditor, deployment-wide", caller(policy.RoleAuditor, "patient_42"), `{}`, DenyDeploymentAudit, 0},
		{"member, deployment-wide", nurse, `{}`, DenyDeploymentAudit, 0},
		{"scoped member, own space", nurse, `{"user_id":"patient_42"}`, "", 1},
		{"scoped member, other space", nurse, `{"user_id":"patient_7"}`, "Access denied: 'audit_log' targets a memory space outside your assigned scope.", 0},
		{"unscoped agent, a space", caller(policy.RoleAgent), `{"user_id":"patient_7"}`, "", 1},
		{"admin, deployment-wide", caller(policy.RoleAdmin, "patient_42"), `{}`, "", 7}, // 3 entries + the 4 denials above
		{"admin, limit", caller(policy.RoleAdmin), `{"limit":2}`, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := e.call(tt.c, "audit_log", tt.args)
			if tt.denied != "" {
				if bot.KindOf(err) != bot.KindDenied || err.Error() != tt.denied {
					t.Fatalf("err = %v, want %q", err, tt.denied)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := r.Data.(map[string]any)["count"]; n != tt.count {
				t.Fatalf("count = %v, want %d\n%s", n, tt.count, r.Text)
			}
		})
	}
	// The denials were audited.
	r := e.ok(caller(policy.RoleAdmin), "audit_log", `{"limit":1}`)
	if !strings.Contains(r.Text, "access_denied") || !strings.Contains(r.Text, "audit_log: Access denied: 'audit_log' targets") {
		t.Fatalf("newest entry: %s; want access_denied with %q", r.Text, "audit_log: Access denied: 'audit_log' targets")
	}
	// Lines, newest first, with stored text escaped onto one line.
	r = e.ok(caller(policy.RoleAdmin), "audit_log", `{"limit":50}`)
	lines := strings.Split(r.Text, "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7:\n%s", len(lines), r.Text)
	}
	if want := `#3  2026-09-26T12:00:00Z  create_principal   user=-  by member-key [prin_member]  line one\nline two`; lines[4] != want {
		t.Fatalf("line:\n%s\nwant:\n%s", lines[4], want)
	}
	if want := `#1  2026-09-26T12:00:00Z  remember           user=patient_42  by member-key [prin_member]  ADD active_medication`; lines[6] != want {
		t.Fatalf("line:\n%s\nwant:\n%s", lines[6], want)
	}
	if r := e.ok(caller(policy.RoleAdmin), "audit_log", `{"user_id":"nobody"}`); r.Text != "No audit entries." {
		t.Fatalf("empty: %q, want %q", r.Text, "No audit entries.")
	}
	for _, bad := range []string{`{"limit":0}`, `{"limit":1001}`, `{"limit":"5"}`, `{"user_id":"a\u0007"}`} {
		if _, err := e.call(caller(policy.RoleAdmin), "audit_log", bad); bot.KindOf(err) != bot.KindInvalid {
			t.Fatalf("%s: %v, want a KindInvalid error", bad, err)
		}
	}
}

func TestVerifyAuditAndPublicKey(t *testing.T) {
	e := newEnv(t)
	auditor := caller(policy.RoleAuditor)
	if r := e.ok(auditor, "verify_audit", `{}`); r.Text != "✓ Audit chain INTACT — 0 entries verified." {
		t.Fatalf("empty: %q, want %q", r.Text, "✓ Audit chain INTACT — 0 entries verified.")
	}
	for i := 0; i < 3; i++ {
		e.audit(auditor, "patient_42", "remember", fmt.Sprintf("ADD fact %d", i))
	}
	if r := e.ok(auditor, "verify_audit", `{}`); r.Text != "✓ Audit chain INTACT — 3 entries verified." || !r.Data.(approvals.Report).Intact {
		t.Fatalf("intact: %q, want %q and an intact report", r.Text, "✓ Audit chain INTACT — 3 entries verified.")
	}
	// Tamper with row 2 through the store.
	err := e.db.Update(context.Background(), func(tx kv.Tx) error {
		v, _ := tx.Get("audit", kv.U64(2))
		return tx.Put("audit", kv.U64(2), []byte(strings.Replace(string(v), "fact 1", "fact 9", 1)))
	})
	if err != nil {
		t.Fatal(err)
	}
	r := e.ok(auditor, "verify_audit", `{}`)
	if r.Text != "⚠ Audit chain BROKEN at seq 2: content tampered (a row's stored bytes were altered)." {
		t.Fatalf("broken: %q, want %q", r.Text, "⚠ Audit chain BROKEN at seq 2: content tampered (a row's stored bytes were altered).")
	}

	r = e.ok(auditor, "export_public_key", `{}`)
	pub := hex.EncodeToString(e.key.Public().(ed25519.PublicKey))
	if r.Text != "Ed25519 public key (hex):\n"+pub || len(pub) != 64 {
		t.Fatalf("public key: %q, want %q (64 hex digits)", r.Text, "Ed25519 public key (hex):\n"+pub)
	}
	if _, err := e.call(auditor, "verify_audit", `{"deep":true}`); bot.KindOf(err) != bot.KindInvalid {
		t.Fatalf("unknown argument: %v, want a KindInvalid error", err)
	}
}

func TestAnnotations(t *testing.T) {
	e := newEnv(t)
	want := map[string]string{
		"audit_log":              "verify ro",
		"verify_audit":           "verify ro",
		"export_public_key":      "verify ro",
		"list_principals":        "admin ro",
		"create_principal":       "admin rw",
		"revoke_principal":       "admin destructive idempotent",
		"rotate_callback_secret": "admin rw",
		"list_suspensions":       "admin ro",
		"suspend_principal":      "admin rw",
		"lift_suspension":        "admin rw",
		"delegate_approvals":     "approve rw",
		"end_delegation":         "approve rw",
		"list_delegations":       "read ro",
	}
	for _, ti := range e.b.Tools() {
		got := string(ti.Capability)
		switch a := ti.Annotations; {
		case a.ReadOnly:
			got += " ro"
		case a.Destructive && a.Idempotent:
			got += " destructive idempotent"
		default:
			got += " rw"
		}
		if want[ti.Name] != got {
			t.Errorf("%s: %s, want %s", ti.Name, got, want[ti.Name])
		}
		if ti.Schema == nil || ti.Schema.Type != "object" || ti.Description == "" {
			t.Errorf("%s: schema %+v, description %q; want an object schema and a description", ti.Name, ti.Schema, ti.Description)
		}
	}
}
