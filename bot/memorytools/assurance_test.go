package memorytools

import (
	"context"
	"testing"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// TestProposalDecisionsRecordAssurance: a memory proposal's decision
// records how its decider was authenticated, as an action's votes do:
// in the stored proposal (history shows it), in the decision's answer,
// and in the item's DecidedVia (the card's "decided by … (via)"). An API
// key's approval is api_key; a rejection in the console from a session
// opened at the identity provider is oidc.
func TestProposalDecisionsRecordAssurance(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.seed()
	d := f.ok(f.member, "confirm_change", arg("memory_id", 2)).Data.(decisionData)
	if d.Assurance != policy.AssuranceKey {
		t.Fatalf("confirm_change over the API answered assurance %q, want %q", d.Assurance, policy.AssuranceKey)
	}
	web := *f.nurse
	web.Surface, web.SignIn = "web", "oidc"
	r := f.ok(&web, "reject_change", arg("memory_id", 3, "reason", "still on it"))
	if got := r.Data.(decisionData).Assurance; got != policy.AssuranceOIDC {
		t.Fatalf("reject_change in the console answered assurance %q, want %q", got, policy.AssuranceOIDC)
	}
	for _, tc := range []struct {
		memoryID uint64
		want     policy.Assurance
	}{{2, policy.AssuranceKey}, {3, policy.AssuranceOIDC}} {
		var fact *memory.Fact
		if err := f.b.Store().View(context.Background(), func(tx kv.Tx) error {
			var err error
			fact, err = memory.Load(tx, memory.Space{UserID: p42}, tc.memoryID)
			return err
		}); err != nil || fact == nil {
			t.Fatalf("loading #%d: %v, want the fact found", tc.memoryID, err)
		}
		if fact.Assurance != tc.want {
			t.Errorf("#%d stored assurance %q, want %q", tc.memoryID, fact.Assurance, tc.want)
		}
		it, err := f.b.Items().Get(context.Background(), fact.ItemID)
		if err != nil {
			t.Fatal(err)
		}
		if len(it.DecidedVia) != 1 || it.DecidedVia[0] != tc.want.Label() {
			t.Errorf("#%d's item is decided via %q, want [%q]", tc.memoryID, it.DecidedVia, tc.want.Label())
		}
	}
	h := f.ok(f.agent, "history", arg("subject", "active_medication"))
	seen := 0
	for _, fd := range h.Data.(map[string]any)["facts"].([]factData) {
		if p := fd.Proposal; p != nil && p.Assurance != "" {
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("history shows the assurance of %d decided proposals, want 2", seen)
	}
}
