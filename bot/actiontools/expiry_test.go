package actiontools

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// TestDecisionAfterExpiryIsRefused plays issue 9.5's attack: the sweeper is
// far away (never run here), the clock passes expires_at, and an approver
// clicks. The approval must be refused (409) and the expiry recorded at
// that moment, once, with one audit entry, its chat update and its
// callback; action_status reports expired without any sweep.
func TestDecisionAfterExpiryIsRefused(t *testing.T) {
	e := newEnv(t, Options{CallbackSecret: []byte("test-callback-secret-0123456789"), CallbackHosts: []string{"127.0.0.1:9"}})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")

	d, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"callback_url": "http://127.0.0.1:9/cb"})) // 30m timeout
	id := d["request_id"].(string)
	e.clock.Advance(30*time.Minute + time.Second)

	be := e.fail(alice, "approve_action", map[string]any{"request_id": id})
	if be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "expired unanswered (denied by automatic policy)") {
		t.Fatalf("approve after expiry: %v %q, want kind %v (KindConflict) naming %q", be.Kind, be.Msg, bot.KindConflict, "expired unanswered (denied by automatic policy)")
	}
	st, text := e.ok(agent, "action_status", map[string]any{"request_id": id})
	if st["status"] != "expired" || !strings.Contains(text, "denied by automatic policy") {
		t.Fatalf("status after a refused late approval: %v %q, want status expired and a text naming %q", st, text, "denied by automatic policy")
	}
	// Later attempts, of any kind, change nothing and record nothing new.
	e.fail(alice, "deny_action", map[string]any{"request_id": id, "reason": "too late"})
	e.fail(alice, "approve_action", map[string]any{"request_id": id})
	if got := e.audits("action_expired"); len(got) != 1 || got[0].Principal != sweeperName {
		t.Fatalf("expiry audited %d times: %+v, want once, by %s", len(got), got, sweeperName)
	}
	if got := e.audits("action_approved", "action_denied"); len(got) != 0 {
		t.Fatalf("an expired request was decided: %+v, want no decision entries", got)
	}
	if n := len(e.events("slack", bot.EventDecided)); n != 1 {
		t.Fatalf("chat updates queued: %d, want 1", n)
	}
	if n := len(e.events(CallbackSink, bot.EventDecided)); n != 1 {
		t.Fatalf("callbacks queued: %d, want 1", n)
	}
	// The sweeper, when it comes, finds nothing left to do.
	if rep := e.sweep(48 * time.Hour); rep["actions"] != 0 {
		t.Fatalf("sweep after the recorded expiry changed %d, want 0", rep["actions"])
	}
}

// TestStatusReportsExpiryWithoutSweep: action_status says expired as soon as
// the time has passed, records the expiry once, and a long poll wakes at
// the expiry rather than waiting for a sweep.
func TestStatusReportsExpiryWithoutSweep(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	d, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	id := d["request_id"].(string)
	if st, _ := e.ok(agent, "action_status", map[string]any{"request_id": id}); st["status"] != "pending" {
		t.Fatalf("before expiry: %v, want status pending", st)
	}
	e.clock.Advance(30 * time.Minute)
	// wait_seconds would block for a minute if the expiry did not end it.
	st, _ := e.ok(agent, "action_status", map[string]any{"request_id": id, "wait_seconds": 60})
	if st["status"] != "expired" {
		t.Fatalf("at expires_at: %v, want status expired", st)
	}
	e.ok(agent, "action_status", map[string]any{"request_id": id})
	if got := e.audits("action_expired"); len(got) != 1 {
		t.Fatalf("expiry audited %d times, want once", len(got))
	}
	if n := len(e.events("slack", bot.EventDecided)); n != 1 {
		t.Fatalf("chat updates queued: %d, want 1", n)
	}
}
