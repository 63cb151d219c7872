package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/receipt"
)

// TestE2EReceiptVerifiedAndRedeemedOnce is issue 15 item 4 against the real
// server: the Go client asks for a confirmation, a member approves, the
// client verifies the receipt offline and redeems it once; a second
// redemption, a tampered receipt and another deployment's receipt are
// refused; the audit shows proposed, approved and executed.
func TestE2EReceiptVerifiedAndRedeemedOnce(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, actionsConfig)
	agent := e.CreateKey("deploy-bot", "agent")
	other := e.CreateKey("other-bot", "agent")
	bob := e.CreateKey("bob", "member")
	admin := e.CreateKey("root", "admin")
	e.Start()

	pk := e.MustOK(agent, "export_public_key", nil)
	pub, err := hex.DecodeString(pk.Data["public_key"].(string))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("export_public_key: %s, want a hex public key of %d bytes", pk, ed25519.PublicKeySize)
	}
	c := mustClient(t, e.URL, agent, ed25519.PublicKey(pub))
	c.PollWait = 2 * time.Second // several short polls while nobody has approved

	type result struct {
		a   *client.Approval
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := json.RawMessage(`{"service": "web"}`)
	go func() {
		a, err := c.ConfirmAction(ctx, client.Action{Tool: "restart_service", Arguments: args, Summary: "restart web"})
		done <- result{a, err}
	}()

	// The request appears pending; bob approves it.
	var id string
	actWait(t, "the pending request", func() bool {
		log := e.MustOK(admin, "audit_log", map[string]any{"limit": 20})
		for _, f := range strings.Fields(log.Text) {
			if strings.HasPrefix(f, "req_") {
				id = strings.TrimRight(f, ":,.")
				return true
			}
		}
		return false
	})
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": id}); st.Data["status"] != "pending" || st.Data["receipt"] != nil {
		t.Fatalf("a pending request carries a receipt: %s, want pending with no receipt", st)
	}
	e.MustOK(bob, "approve_action", map[string]any{"request_id": id})

	res := <-done
	if res.err != nil {
		t.Fatalf("ConfirmAction: %v", res.err)
	}
	a := res.a
	if a.RequestID != id || a.Tool != "restart_service" || a.Edited || string(a.Arguments) != `{"service":"web"}` || !strings.HasPrefix(a.ConfirmedBy, "bob [") {
		t.Fatalf("approval: %+v, want %s of restart_service, not edited, arguments %s, confirmed by %q…", a, id, `{"service":"web"}`, "bob [")
	}
	if a.Payload.ConfirmedBy != a.ConfirmedBy || a.Payload.Grant != "" || a.Payload.ExpiresAt <= a.Payload.IssuedAt {
		t.Fatalf("receipt payload: %+v, want confirmed_by %q, no grant, expires_at after issued_at", a.Payload, a.ConfirmedBy)
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": id})
	if st.Data["receipt"] != a.Receipt || st.Data["approved_args_sha256"] != a.Payload.ApprovedArgsSHA256 || st.Data["approved_args_sha256"] != st.Data["args_sha256"] {
		t.Fatalf("action_status: %s, want the client's receipt and approved_args_sha256 %s, equal to args_sha256", st, a.Payload.ApprovedArgsSHA256)
	}

	// Refusals before the real redemption change nothing.
	_, sig, _ := strings.Cut(a.Receipt, ".")
	p := a.Payload
	p.ApprovedArgsSHA256 = strings.Repeat("0", 64)
	forged, err := receipt.Sign(p, func(m []byte) []byte { return nil })
	if err != nil {
		t.Fatal(err)
	}
	fHead, _, _ := strings.Cut(forged, ".")
	if r := e.Call(agent, "redeem_receipt", map[string]any{"receipt": fHead + "." + sig}); r.Status != http.StatusBadRequest || r.Field != "receipt" || !strings.Contains(r.Error, "altered") {
		t.Fatalf("tampered receipt: %s, want 400 on field receipt saying %q", r, "altered")
	}
	otherKey := ed25519.NewKeyFromSeed([]byte(strings.Repeat("x", 32)))
	p = a.Payload
	p.Key = receipt.KeyID(otherKey.Public().(ed25519.PublicKey))
	elsewhere, _ := receipt.Sign(p, func(m []byte) []byte { return ed25519.Sign(otherKey, m) })
	if r := e.Call(agent, "redeem_receipt", map[string]any{"receipt": elsewhere}); r.Status != http.StatusBadRequest || !strings.Contains(r.Error, "issued by key") {
		t.Fatalf("another deployment's receipt: %s, want 400 saying %q", r, "issued by key")
	}
	if r := e.Call(other, "redeem_receipt", map[string]any{"receipt": a.Receipt}); r.Status != http.StatusForbidden {
		t.Fatalf("another agent redeems: %s, want 403", r)
	}
	if _, err := mustClient(t, e.URL, agent, otherKey.Public().(ed25519.PublicKey)).ConfirmAction(ctx, client.Action{Tool: "read_logs"}); !errors.Is(err, client.ErrReceipt) {
		t.Fatalf("a client pinned to another key accepted a receipt: %v, want %v", err, client.ErrReceipt)
	}

	// Redeemed once; the second redemption is refused naming when.
	if err := c.Redeem(ctx, a.Receipt); err != nil {
		t.Fatalf("Redeem: %v", err)
	}
	err = c.Redeem(ctx, a.Receipt)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "already redeemed at 20") {
		t.Fatalf("second Redeem: %v, want a 409 APIError saying %q", err, "already redeemed at 20")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": id}); st.Data["executed_at"] == nil {
		t.Fatalf("action_status after redemption: %s, want executed_at set", st)
	}

	// Three audited facts: proposed, approved, executed, once each.
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 50}).Text
	for _, want := range []string{"action_requested", "action_approved", "action_executed"} {
		n := 0
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, want) && strings.Contains(line, id) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s for %s audited %d times, want once, in:\n%s", want, id, n, log)
		}
	}

	// An auto-approved request (read-only) gets a receipt too.
	auto, err := c.ConfirmAction(ctx, client.Action{Tool: "read_logs", Arguments: json.RawMessage(`{"lines": 10}`)})
	if err != nil || !strings.Contains(auto.Payload.ConfirmedBy, "auto") {
		t.Fatalf("auto-approved: %+v %v, want no error and confirmed_by containing %q", auto, err, "auto")
	}
	if err := c.Redeem(ctx, auto.Receipt); err != nil {
		t.Fatalf("Redeem auto: %v", err)
	}
}

// mustClient is client.New, failing the test on an error.
func mustClient(t *testing.T, url, key string, pub ed25519.PublicKey) *client.Client {
	t.Helper()
	c, err := client.New(url, key, pub)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}
