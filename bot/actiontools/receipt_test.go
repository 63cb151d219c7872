package actiontools

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/countersign/countersign/receipt"
)

// TestReceiptRedeemOnceAndExpiry: an approved request's receipt verifies
// with the bot's key and binds its tool and hash; it redeems once (the
// executed mark and the action_executed entry commit together, and the
// store runs every write twice, so a side effect outside the transaction
// would show); past DefaultReceiptTTL it is refused, and so is a receipt
// whose request is not approved.
func TestReceiptRedeemOnceAndExpiry(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")

	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	if d["receipt"] != nil || d["approved_arguments"] != nil {
		t.Fatalf("a pending request carries a receipt: %v, want no receipt and no approved_arguments", d)
	}
	id := d["request_id"].(string)
	ok, _ := e.ok(alice, "approve_action", map[string]any{"request_id": id})
	rec, _ := ok["receipt"].(string)
	p, err := receipt.Verify(rec, e.key.Public().(ed25519.PublicKey), e.clock.Now())
	if err != nil || p.RequestID != id || p.Tool != "restart_service" || p.ApprovedArgsSHA256 != ok["args_sha256"] || p.ApprovedArgsSHA256 != ok["approved_args_sha256"] {
		t.Fatalf("receipt %+v: %v (answer %v); want request %s, tool restart_service, approved args hash %v (args_sha256 and approved_args_sha256) and no error", p, err, ok, id, ok["args_sha256"])
	}

	// A second request, approved too, then left past the receipt's expiry.
	d2, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "db"}})
	ok2, _ := e.ok(alice, "approve_action", map[string]any{"request_id": d2["request_id"]})

	if _, text := e.ok(agent, "redeem_receipt", map[string]any{"receipt": rec}); !strings.HasPrefix(text, "Redeemed: "+id) {
		t.Fatalf("redeem: %q, want it to start with %q", text, "Redeemed: "+id)
	}
	be := e.fail(agent, "redeem_receipt", map[string]any{"receipt": rec})
	if be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "already redeemed at "+stamp(e.clock.Now())) {
		t.Fatalf("second redemption: %v (kind %d), want KindConflict naming %q", be, be.Kind, "already redeemed at "+stamp(e.clock.Now()))
	}
	if n := len(e.audits("action_executed")); n != 1 {
		t.Fatalf("%d action_executed entries, want 1", n)
	}
	if r := e.request(id); r.ExecutedAt.IsZero() || !strings.HasPrefix(r.ExecutedBy, "deploy-bot") {
		t.Fatalf("stored request: %+v, want it executed by deploy-bot", r)
	}

	e.clock.Advance(DefaultReceiptTTL + time.Second)
	be = e.fail(agent, "redeem_receipt", map[string]any{"receipt": ok2["receipt"]})
	if be.Kind != bot.KindInvalid || be.Field != "receipt" || !strings.Contains(be.Msg, "expired") {
		t.Fatalf("expired receipt: %v (kind %d), want KindInvalid on field receipt naming %q", be, be.Kind, "expired")
	}
	if r := e.request(d2["request_id"].(string)); !r.ExecutedAt.IsZero() {
		t.Fatalf("an expired receipt marked the request executed")
	}
	if be := e.fail(agent, "redeem_receipt", map[string]any{"receipt": ""}); be.Kind != bot.KindInvalid || be.Field != "receipt" {
		t.Fatalf("empty receipt: %v (kind %d), want KindInvalid on field receipt", be, be.Kind)
	}
}
