package policy

import (
	"errors"
	"testing"
	"time"
)

// TestDelegation is the table of who may decide what under a delegation:
// the delegate decides in the delegator's name only where both would be
// eligible, never wider than either, and the delegator's approval counts
// once.
func TestDelegation(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	until := at.Add(4 * time.Hour)
	pharm := Decidable{
		Ref: "req_1", RequesterID: "prin_agent", RequesterName: "ward_bot", RequesterDisplay: "ward_bot [prin_agent]",
		SpaceUserID: "patient_42", Approvers: Approvers{Groups: []string{"pharmacists"}}, ApproversOf: "order_medication requests", At: at,
		Delegable: true,
	}
	review := pharm
	review.Delegable, review.Ref = false, "rev_1" // records no vote for a delegator
	alice := person("alice", "chat:alice", RoleMember)
	alice.Groups = []string{"pharmacists"}
	lent := func(d Decider, from ...Decider) Decider {
		for _, x := range from {
			d.Delegators = append(d.Delegators, Delegator{Decider: x, Until: until})
		}
		return d
	}
	bob := person("bob", "chat:bob", RoleMember)
	suspendedAlice := alice
	suspendedAlice.Suspended = "scim: deactivated in the directory, 2026-12-02 13:00 UTC"
	scopedAlice := alice
	scopedAlice.Scopes = []string{"patient_7"}
	viewerAlice := alice
	viewerAlice.Role = RoleViewer
	scopedBob := bob
	scopedBob.Scopes = []string{"patient_7"}
	agentBob := Decider{ID: "prin_bob", Name: "bob", Display: "bob [prin_bob]", Kind: "agent", Role: RoleMember}
	carol := person("carol", "chat:carol", RoleMember)
	carol.Groups = []string{"pharmacists"}
	expired := bob
	expired.Delegators = []Delegator{{Decider: alice, Until: at}}

	stepUp := pharm
	stepUp.StepUp = 5 * time.Minute
	freshBob := lent(bob, alice)
	freshBob.AuthAt, freshBob.AuthMethod = at.Add(-time.Minute), "oidc"

	// bob asks himself (a person-driven run) and would break glass on
	// alice's lent rights; alice may on her own request.
	breakGlass := pharm
	breakGlass.RequesterID, breakGlass.RequesterName, breakGlass.RequesterDisplay = "chat:bob", "bob", "bob [chat:bob]"
	breakGlass.BreakGlass = &BreakGlass{Listed: true, Reason: "pump failing", RequesterKind: "person"}
	freshLentBob := lent(bob, alice)
	freshLentBob.AuthAt, freshLentBob.AuthMethod = at.Add(-time.Minute), "oidc"
	aliceBreaks := breakGlass
	aliceBreaks.RequesterID, aliceBreaks.RequesterName, aliceBreaks.RequesterDisplay = "chat:alice", "alice", "alice [chat:alice]"
	freshAlice := alice
	freshAlice.AuthAt, freshAlice.AuthMethod = at.Add(-time.Minute), "oidc"

	ownRequest := pharm
	ownRequest.RequesterID, ownRequest.RequesterName, ownRequest.RequesterDisplay = "chat:alice", "alice", "alice [chat:alice]"

	aliceCounted := pharm
	aliceCounted.Counted = []StageApproval{{ID: "chat:alice", Name: "alice"}}
	bobForAlice := pharm
	bobForAlice.Counted = []StageApproval{{ID: "chat:bob", Name: "bob", For: "alice"}}
	daveForAlice := pharm
	daveForAlice.Counted = []StageApproval{{ID: "chat:dave", Name: "dave", For: "alice"}}

	staged := pharm
	staged.Stage = "pharmacist, stage 2 of 2"
	staged.EarlierStages = []StageApproval{{ID: "chat:alice", Name: "alice", Stage: "prescriber"}}
	stagedFor := pharm
	stagedFor.Stage = "pharmacist, stage 2 of 2"
	stagedFor.EarlierStages = []StageApproval{{ID: "chat:bob", Name: "bob", Stage: "prescriber", For: "carol"}}

	tests := []struct {
		name  string
		d     Decider
		it    Decidable
		check DecisionCheck
		for_  string // the delegator ActingFor names, when allowed
	}{
		{"bob alone is no pharmacist", bob, pharm, CheckApprovers, ""},
		{"bob with alice's approvals", lent(bob, alice), pharm, CheckAllowed, "alice"},
		{"alice herself, delegation or not", alice, pharm, CheckAllowed, ""},
		{"an expired delegation lends nothing", expired, pharm, CheckApprovers, ""},
		{"a suspended delegator lends nothing", lent(bob, suspendedAlice), pharm, CheckApprovers, ""},
		{"the delegator's scope bounds it", lent(bob, scopedAlice), pharm, CheckApprovers, ""},
		{"the delegator's capability bounds it", lent(bob, viewerAlice), pharm, CheckApprovers, ""},
		{"the delegate's scope bounds it", lent(scopedBob, alice), pharm, CheckScope, ""},
		{"an agent is never a delegate", lent(agentBob, alice), pharm, CheckPerson, ""},
		{"not the delegator's own request", lent(bob, alice), ownRequest, CheckApprovers, ""},
		{"the delegate's own sign-in for step-up", lent(bob, alice), stepUp, CheckStepUp, ""},
		{"the delegate stepped up", freshBob, stepUp, CheckAllowed, "alice"},
		{"alice approved already: bob may not add hers", lent(bob, alice), aliceCounted, CheckApprovers, ""},
		{"bob again for alice is his repeat", lent(bob, alice), bobForAlice, CheckAllowed, "alice"},
		{"alice after bob approved for her", alice, bobForAlice, CheckDelegation, ""},
		{"bob for alice after dave did", lent(bob, alice), daveForAlice, CheckApprovers, ""},
		{"a second delegation reaches it", lent(bob, alice, carol), aliceCounted, CheckAllowed, "carol"},
		{"alice approved an earlier stage", lent(bob, alice), staged, CheckApprovers, ""},
		{"carol's earlier stage, approved by bob for her", carol, stagedFor, CheckStage, ""},
		{"not passed on: carol lent what bob was lent", lent(carol, lent(bob, alice)), Decidable{Ref: "req_2", SpaceUserID: "patient_42", At: at, Approvers: Approvers{Principals: []string{"alice"}}, Delegable: true}, CheckApprovers, ""},
		{"never one's own delegator", lent(alice, alice), Decidable{Ref: "req_3", At: at, Approvers: Approvers{Principals: []string{"zed"}}, Delegable: true}, CheckApprovers, ""},
		{"no break-glass on lent rights", freshLentBob, breakGlass, CheckApprovers, ""},
		{"nothing lent where the item records no delegation", lent(bob, alice), review, CheckApprovers, ""},
		{"break-glass on one's own rights", freshAlice, aliceBreaks, CheckAllowed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Decide(tt.d, tt.it)
			got := CheckAllowed
			if r != nil {
				got = r.Check
			}
			if got != tt.check {
				t.Fatalf("Decide = %v (%v), want %v", got, r, tt.check)
			}
			if r != nil && !errors.Is(r, tt.check) {
				t.Errorf("the refusal does not unwrap to %v", tt.check)
			}
			var who string
			if x := ActingFor(tt.d, tt.it); x != nil {
				who = x.Name
			}
			if r == nil && who != tt.for_ {
				t.Errorf("ActingFor = %q, want %q", who, tt.for_)
			}
		})
	}
}

func TestDelegationWindow(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		until time.Time
		ok    bool
	}{
		{now.Add(4 * time.Hour), true},
		{now.Add(MaxDelegation), true},
		{now, false},
		{now.Add(-time.Minute), false},
		{now.Add(MaxDelegation + time.Minute), false},
	} {
		if got := CheckWindow(now, tt.until); (got == "") != tt.ok {
			t.Errorf("CheckWindow(now, now%+v) = %q, want ok=%v", tt.until.Sub(now), got, tt.ok)
		}
	}
	d := Delegation{From: "alice", To: "bob", Start: now, Until: now.Add(time.Hour)}
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{{now.Add(-time.Second), false}, {now, true}, {now.Add(59 * time.Minute), true}, {now.Add(time.Hour), false}} {
		if got := d.ActiveAt(tt.at); got != tt.want {
			t.Errorf("ActiveAt(start%+v) = %v, want %v", tt.at.Sub(now), got, tt.want)
		}
	}
}

// BenchmarkDecide measures the one rule for a decider in their own right,
// and for a delegate who decides on the third of three delegations lent
// to them (each delegator checked by the rule in turn).
func BenchmarkDecide(b *testing.B) {
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	it := Decidable{Ref: "req_1", RequesterID: "prin_agent", RequesterName: "ward_bot", SpaceUserID: "patient_42",
		Approvers: Approvers{Principals: []string{"carol"}}, At: at, Delegable: true,
		Counted: []StageApproval{{ID: "chat:dave", Name: "dave"}}}
	own := person("carol", "chat:carol", RoleMember)
	lent := person("bob", "chat:bob", RoleMember)
	for _, name := range []string{"alice", "amy", "carol"} {
		lent.Delegators = append(lent.Delegators, Delegator{Decider: person(name, "chat:"+name, RoleMember), Until: at.Add(time.Hour)})
	}
	for _, bc := range []struct {
		name string
		d    Decider
	}{{"own right", own}, {"third delegation", lent}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if r := Decide(bc.d, it); r != nil {
					b.Fatal(r)
				}
			}
		})
	}
}
