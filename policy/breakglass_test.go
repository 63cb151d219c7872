package policy

import (
	"errors"
	"testing"
	"time"
)

// TestBreakGlassDecisions is the exception's table: who may approve their
// own request as break-glass, and which check refuses everyone else.
func TestBreakGlassDecisions(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	fresh := func(d Decider) Decider {
		d.AuthAt, d.AuthMethod, d.Surface, d.SignIn = at.Add(-time.Minute), "oidc", "web", "oidc"
		return d
	}
	alice := fresh(person("alice", "prin_a", RoleMember))
	bob := fresh(person("bob", "prin_b", RoleMember))
	stale := person("alice", "prin_a", RoleMember)
	stale.AuthAt, stale.AuthMethod = at.Add(-time.Hour), "oidc"
	aliceChat := Decider{ID: "chat:alice", Name: "Alice", Display: "Alice [U1]", Kind: "person", Role: RoleMember, Surface: "slack"}
	aliceAgent := Decider{ID: "prin_k", Name: "alice", Display: "alice [prin_k]", Kind: "agent", Role: RoleAdmin}
	suspended := alice
	suspended.Suspended = "slack account deactivated"
	scoped := alice
	scoped.Scopes = []string{"patient_99"}
	viewer := fresh(person("alice", "prin_a", RoleViewer))

	own := func(mod func(*Decidable)) Decidable {
		it := Decidable{
			Ref: "req_1", RequesterID: "prin_a", RequesterName: "alice", RequesterDisplay: "alice [prin_a]",
			SpaceUserID: "patient_42", Approvers: Approvers{Roles: []string{"member"}}, ApproversOf: "restart_service requests",
			At:         at,
			BreakGlass: &BreakGlass{Listed: true, Reason: "payments down, nobody answers", RequesterKind: "person", StepUp: 10 * time.Minute},
		}
		if mod != nil {
			mod(&it)
		}
		return it
	}
	tests := []struct {
		name string
		d    Decider
		it   Decidable
		want error // nil: allowed
	}{
		{"the requester, stepped up, with a reason", alice, own(nil), nil},
		{"without break-glass the requester is refused as always", alice, own(func(it *Decidable) { it.BreakGlass = nil }), CheckRequester},
		{"someone else's request", bob, own(nil), CheckBreakGlass},
		{"an agent's request, even under the person's name", alice, own(func(it *Decidable) { it.BreakGlass.RequesterKind = "agent" }), CheckBreakGlass},
		{"a request of unknown kind fails closed", alice, own(func(it *Decidable) { it.BreakGlass.RequesterKind = "" }), CheckBreakGlass},
		{"an agent key as the decider", aliceAgent, own(nil), CheckPerson},
		{"a tool not listed", alice, own(func(it *Decidable) { it.BreakGlass.Listed = false }), CheckBreakGlass},
		{"no reason", alice, own(func(it *Decidable) { it.BreakGlass.Reason = "  " }), CheckBreakGlass},
		{"an overdue review blocks", alice, own(func(it *Decidable) { it.BreakGlass.Overdue = "rev_1 due 2026-12-01T09:00:00Z" }), CheckBreakGlass},
		{"a chat click carries no step-up", aliceChat, own(nil), CheckStepUp},
		{"a sign-in older than the window", stale, own(nil), CheckStepUp},
		{"step-up is mandatory even when the tool asks none", stale, own(func(it *Decidable) { it.StepUp = 0; it.BreakGlass.StepUp = 0 }), CheckStepUp},
		{"suspension comes first", suspended, own(func(it *Decidable) { it.BreakGlass.Reason = "" }), CheckSuspended},
		{"a role without approve", viewer, own(nil), CheckCapability},
		{"scope still holds", scoped, own(nil), CheckScope},
		{"the tool's approvers still hold", alice, own(func(it *Decidable) { it.Approvers = Approvers{Groups: []string{"pharmacists"}} }), CheckApprovers},
		{"assurance still holds", alice, own(func(it *Decidable) { it.MinAssurance = AssurancePasskey }), CheckAssurance},
	}
	for _, tt := range tests {
		r := Decide(tt.d, tt.it)
		switch {
		case tt.want == nil && r != nil:
			t.Errorf("%s: refused (%s: %s), want allowed", tt.name, r.Check, r.Message)
		case tt.want != nil && r == nil:
			t.Errorf("%s: allowed, want refused by %v", tt.name, tt.want)
		case tt.want != nil && !errors.Is(r, tt.want):
			t.Errorf("%s: refused by %s (%s), want %v", tt.name, r.Check, r.Message, tt.want)
		case r != nil && r.Message[:len("Access denied: ")] != "Access denied: ":
			t.Errorf("%s: refusal %q does not start with the seeds' wording", tt.name, r.Message)
		}
	}
	if got := CheckBreakGlass.String(); got != "break-glass refused" {
		t.Errorf("CheckBreakGlass.String() = %q, want %q", got, "break-glass refused")
	}
}
