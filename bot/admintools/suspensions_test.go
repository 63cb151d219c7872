package admintools

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// TestSuspensionTools: an admin suspends a principal, sees it listed and
// lifts it, each audited; the suspended principal's calls carry the
// suspension (read from the store in the call's transaction), and only an
// admin may use the tools.
func TestSuspensionTools(t *testing.T) {
	e := newEnv(t)
	admin, member := caller(policy.RoleAdmin), caller(policy.RoleMember)
	if r := e.ok(admin, "list_suspensions", `{}`); r.Text != "Nobody is suspended from approving." {
		t.Fatalf("list before: %q, want %q", r.Text, "Nobody is suspended from approving.")
	}
	if _, err := e.call(member, "suspend_principal", `{"name":"dr_smith","reason":"x"}`); bot.KindOf(err) != bot.KindDenied {
		t.Fatalf("a member suspending: %v, want forbidden", err)
	}
	for _, bad := range []string{`{"name":"dr smith","reason":"x"}`, `{"name":"dr_smith","reason":" "}`, `{"name":"dr_smith"}`} {
		if _, err := e.call(admin, "suspend_principal", bad); bot.KindOf(err) != bot.KindInvalid {
			t.Errorf("suspend_principal %s: %v, want invalid", bad, err)
		}
	}
	r := e.ok(admin, "suspend_principal", `{"name":"dr_smith","reason":"on leave; badge revoked"}`)
	if data(r)["recorded"] != true || !strings.Contains(r.Text, "Suspended dr_smith") {
		t.Fatalf("suspend: %q %v; want recorded and a text with %q", r.Text, data(r), "Suspended dr_smith")
	}
	if r := e.ok(admin, "suspend_principal", `{"name":"DR_SMITH","reason":"again"}`); data(r)["recorded"] != false {
		t.Fatalf("a second suspension of the same principal (any case) was recorded: %v, want recorded false", data(r))
	}
	r = e.ok(admin, "list_suspensions", `{}`)
	if !strings.Contains(r.Text, "dr_smith  admin: on leave; badge revoked, 2026-09-26 12:00 UTC") {
		t.Fatalf("list: %q, want it to contain %q", r.Text, "dr_smith  admin: on leave; badge revoked, 2026-09-26 12:00 UTC")
	}
	// The suspended principal's transaction sees the suspension.
	smith := &bot.Caller{Principal: bot.Principal{ID: "chat:dr_smith", Name: "dr_smith", Role: policy.RoleMember, Kind: "person"}, Surface: "slack", ChatID: "U1"}
	c := &bot.Call{Caller: smith, Now: e.b.Now(), Tool: &bot.Tool{Name: "test"}}
	var seen string
	if err := e.b.Update(t.Context(), c, func(tx *bot.Tx) error { seen = c.Caller.Suspended; return nil }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen, "on leave") || smith.Suspended != "" {
		t.Fatalf("in the call's transaction Suspended = %q (the shared caller: %q), want the suspension on the call only", seen, smith.Suspended)
	}
	if got := c.Caller.MayDecide(policy.Decidable{Ref: "#1"}); got == nil || got.Check != policy.CheckSuspended || !strings.Contains(got.Message, "is suspended from approving") {
		t.Fatalf("the rule for the suspended caller: %+v, want a %v refusal", got, policy.CheckSuspended)
	}
	r = e.ok(admin, "lift_suspension", `{"name":"dr_smith","reason":"back from leave"}`)
	if data(r)["lifted"] != true {
		t.Fatalf("lift: %q %v; want lifted", r.Text, data(r))
	}
	if r := e.ok(admin, "lift_suspension", `{"name":"dr_smith"}`); data(r)["lifted"] != false {
		t.Fatalf("lifting twice: %v, want lifted false", data(r))
	}
	audit := e.ok(admin, "audit_log", `{}`).Text
	for _, want := range []string{"principal_suspended", `"dr_smith" suspended from approving (admin: on leave; badge revoked`, "suspension_lifted", "back from leave"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, audit)
		}
	}
}

func data(r bot.Result) map[string]any {
	m, _ := r.Data.(map[string]any)
	return m
}
