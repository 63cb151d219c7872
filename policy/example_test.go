package policy_test

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/policy"
)

// The safety gate is a pure function of the facts, the policy and the
// time: the same inputs always give the same verdict and reasons, in the
// seeds' words.
func ExampleCheckBeforeAct() {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	facts := []policy.FactState{
		{ID: 1, Subject: "api_timeout", Value: "30s", Status: policy.StatusActive, Confidence: 0.5, SetAt: now.Add(-time.Hour)},
	}
	v, reasons := policy.CheckBeforeAct(facts, policy.DefaultSafetyPolicy(), now)
	fmt.Println(policy.RenderCheck("api_timeout", v, reasons, nil))

	facts[0].Confidence = 0.9
	v, reasons = policy.CheckBeforeAct(facts, policy.DefaultSafetyPolicy(), now)
	fmt.Println(policy.RenderCheck("api_timeout", v, reasons, []string{"api_timeout = 30s"}))
	// Output:
	// ⛔ BLOCKED — do NOT act on 'api_timeout':
	//   • confidence 0.5 < required 0.7
	// ✅ SAFE to act on 'api_timeout'.
	//   current: api_timeout = 30s
}

// The one rule for who may decide: an agent never decides, a requester
// never decides their own request, and scope and the item's approvers
// hold for everyone else. Decide's refusal names the check that refused.
func ExampleDecide_whoMayDecide() {
	item := policy.Decidable{
		Ref:         "req_7",
		RequesterID: "prin_agent", RequesterName: "ward_bot", RequesterDisplay: "ward_bot [prin_agent]",
		SpaceUserID: "patient_42",
		Approvers:   policy.Approvers{Roles: []string{"member"}},
	}
	people := []policy.Decider{
		{ID: "prin_agent", Name: "ward_bot", Kind: "agent", Role: policy.RoleAgent},
		{ID: "prin_2", Name: "dr_jones", Kind: "person", Role: policy.RoleMember, Scopes: []string{"patient_7"}},
		{ID: "prin_3", Name: "nurse_lee", Kind: "person", Role: policy.RoleViewer},
		{ID: "prin_1", Name: "dr_smith", Kind: "person", Role: policy.RoleMember, Scopes: []string{"patient_42"}},
	}
	for _, d := range people {
		r := policy.Decide(d, item)
		if r == nil {
			fmt.Printf("%s: may decide\n", d.Name)
			continue
		}
		fmt.Printf("%s: %s\n", d.Name, r.Short(d.Role))
	}
	// Output:
	// ward_bot: agents and services do not decide
	// dr_jones: outside your scope
	// nurse_lee: needs role member or admin (you are viewer)
	// dr_smith: may decide
}
