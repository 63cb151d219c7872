package actiontools

import (
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

func stepUpOptions() Options {
	return Options{StepUp: StepUpSpec{Within: 5 * time.Minute, Tools: []string{"restart_service"}, Categories: []string{"destructive"}}}
}

// steppedUp is c as a web session after a sign-in at the identity
// provider ago before now.
func steppedUp(c *bot.Caller, now time.Time, ago time.Duration) *bot.Caller {
	cp := *c
	cp.Surface, cp.AuthAt, cp.AuthMethod = "web", now.Add(-ago), "oidc"
	return &cp
}

// TestStepUpIsInTheOneRule: approving a request that requires step-up
// (by tool, by category, by an exec command's category) with a person's
// API key is refused with the step-up message and audited, the request
// stays pending; refusing it needs no step-up; a stale sign-in is
// refused; a fresh one approves and the audit entry says how.
func TestStepUpIsInTheOneRule(t *testing.T) {
	e := newEnv(t, stepUpOptions())
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	now := e.clock.Now()

	for _, args := range []map[string]any{
		destroyArgs(nil), // destructive by category
		{"tool": "restart_service", "arguments": map[string]any{"service": "api"}},                                           // by tool
		{"tool": "exec", "arguments": map[string]any{"command": []any{"kubectl", "delete", "pod", "x"}}, "dry_run": "1 pod"}, // an exec command's category
	} {
		d, _ := e.ok(agent, "confirm_action", args)
		id := d["request_id"].(string)
		if r := e.request(id); r.StepUp != 5*time.Minute {
			t.Fatalf("%v: request StepUp = %s, want 5m", args["tool"], r.StepUp)
		}
		be := e.fail(alice, "approve_action", map[string]any{"request_id": id})
		if be.Kind != bot.KindDenied || !strings.HasPrefix(be.Msg, "Access denied: step-up required: approve in the console after signing in again.") || !errors.Is(be, policy.CheckStepUp) {
			t.Fatalf("%v: approve with a person's key: %v (kind %d), want KindDenied by CheckStepUp, starting %q", args["tool"], be, be.Kind, "Access denied: step-up required: approve in the console after signing in again.")
		}
		if r := e.request(id); r.Status != "pending" || len(r.Votes) != 0 {
			t.Fatalf("%v: after the refusal the request is %s with %d votes, want pending with none", args["tool"], r.Status, len(r.Votes))
		}
	}
	denied := e.audits("access_denied")
	if len(denied) != 3 || !strings.Contains(denied[0].Detail, "approve_action: Access denied: step-up required") || denied[0].Principal != alice.String() {
		t.Fatalf("refusals audited: %+v, want 3, the first by %s naming %q", denied, alice.String(), "approve_action: Access denied: step-up required")
	}

	// Stale: signed in six minutes ago.
	d, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	id := d["request_id"].(string)
	if be := e.fail(steppedUp(alice, now, 6*time.Minute), "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckStepUp) || !strings.Contains(be.Msg, "not within the last 5m0s") {
		t.Fatalf("a stale sign-in: %v, want CheckStepUp naming %q", be, "not within the last 5m0s")
	}
	// Fresh: approved, and the audit entry records how.
	got, _ := e.ok(steppedUp(alice, now, time.Minute), "approve_action", map[string]any{"request_id": id})
	if got["status"] != "approved" {
		t.Fatalf("approved after step-up: %v, want status approved", got)
	}
	ap := e.audits("action_approved")
	want := "step-up oidc auth_time=" + now.Add(-time.Minute).UTC().Format(time.RFC3339)
	if len(ap) != 1 || !strings.Contains(ap[0].Detail, want) {
		t.Fatalf("approval audited as %+v, want %q in it", ap, want)
	}

	// Refusing needs no step-up.
	d, _ = e.ok(agent, "confirm_action", destroyArgs(nil))
	if got, _ := e.ok(alice, "deny_action", map[string]any{"request_id": d["request_id"], "reason": "not today"}); got["status"] != "denied" {
		t.Fatalf("deny without step-up: %v, want status denied", got)
	}
	// A tool outside step-up is approved with the key as before.
	d, _ = e.ok(agent, "confirm_action", map[string]any{"tool": "create_server", "arguments": map[string]any{"region": "eu", "size": "small"}})
	if r := e.request(d["request_id"].(string)); r.StepUp != 0 {
		t.Fatalf("create_server requires step-up %s, want none", r.StepUp)
	}
	if got, _ := e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"]}); got["status"] != "approved" {
		t.Fatalf("a tool without step-up: %v, want status approved", got)
	}
	// The item says so, for cards and the console.
	it, err := e.b.Items().Get(t.Context(), e.request(id).ItemID)
	if err != nil || it.StepUp != 5*time.Minute {
		t.Fatalf("item of a step-up request: StepUp %s, %v; want 5m and no error", it.StepUp, err)
	}
}

// TestStepUpQuorumEveryApprover: under quorum 2, each approver must be
// stepped up: a fresh first vote counts (audited with its step-up), a
// second approver without one is refused, and with one approves.
func TestStepUpQuorumEveryApprover(t *testing.T) {
	e := newEnv(t, stepUpOptions())
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	now := e.clock.Now()
	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "dry_run": "redeploy v41"})
	id := d["request_id"]
	if got, _ := e.ok(steppedUp(alice, now, 0), "approve_action", map[string]any{"request_id": id}); got["status"] != "pending" || got["tally"] != "1 of 2 approvals: alice" {
		t.Fatalf("first stepped-up vote: %v, want status pending and tally %q", got, "1 of 2 approvals: alice")
	}
	if be := e.fail(bob, "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckStepUp) {
		t.Fatalf("second approver without step-up: %v, want CheckStepUp", be)
	}
	if got, _ := e.ok(steppedUp(bob, now, 2*time.Minute), "approve_action", map[string]any{"request_id": id}); got["status"] != "approved" {
		t.Fatalf("second stepped-up vote: %v, want status approved", got)
	}
	votes := e.audits("action_vote")
	if len(votes) != 1 || !strings.Contains(votes[0].Detail, "step-up oidc auth_time=") {
		t.Fatalf("vote audited as %+v, want 1 naming %q", votes, "step-up oidc auth_time=")
	}
}

// TestStepUpConfigRefused: step-up naming an undeclared or read-only tool,
// or a category that is not one, stops Register with the key at fault.
func TestStepUpConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		spec StepUpSpec
		want string
	}{
		{StepUpSpec{Tools: []string{"drop_table"}}, `step_up.tools[0]: "drop_table" is not a declared tool`},
		{StepUpSpec{Tools: []string{"read_logs"}}, `step_up.tools[0]: "read_logs" is read-only`},
		{StepUpSpec{Categories: []string{"dangerous"}}, `step_up.categories[0]: "dangerous" is not a category`},
		{StepUpSpec{Categories: []string{"read-only"}}, `step_up.categories[0]: read-only calls are approved automatically`},
		{StepUpSpec{Within: -time.Minute, Categories: []string{"destructive"}}, "step_up.within: must be positive"},
	} {
		o := Options{Tools: testTools(), StepUp: tt.spec}
		db, err := bolt.Open(filepath.Join(t.TempDir(), "cs.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		b, err := bot.New(bot.Options{Store: db, SigningKey: ed25519.NewKeyFromSeed(make([]byte, 32)), Now: func() time.Time { return start }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Register(b, o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: Register = %v, want %q", tt.spec, err, tt.want)
		}
	}
}
