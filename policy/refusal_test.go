package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/policy"
)

// TestDecideRefusalIsTyped: Decide is nil exactly when the rule allows;
// otherwise its *Refusal names the check, carries the refusal to show
// ("Access denied: …"), and is an error that unwraps to its check, through a
// *policy.Error that carries it too, so that a surface tells a step-up
// refusal by errors.Is, never by its text.
func TestDecideRefusalIsTyped(t *testing.T) {
	at := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	it := policy.Decidable{Ref: "#7", RequesterID: "prin_agent", RequesterName: "ward_bot", RequesterDisplay: "ward_bot [prin_agent]",
		SpaceUserID: "patient_42", Approvers: policy.Approvers{Principals: []string{"bob", "alice"}}, StepUp: 5 * time.Minute, At: at}
	person := func(name string) policy.Decider {
		return policy.Decider{ID: "prin_" + name, Name: name, Kind: "person", Role: policy.RoleMember}
	}
	fresh := person("bob")
	fresh.AuthAt = at.Add(-time.Minute)
	scoped := person("bob")
	scoped.Scopes = []string{"patient_99"}
	tests := []struct {
		name  string
		d     policy.Decider
		check policy.DecisionCheck
	}{
		{"a fresh sign-in", fresh, policy.CheckAllowed},
		{"no fresh sign-in", person("alice"), policy.CheckStepUp},
		{"an agent", policy.Decider{ID: "p", Name: "x", Kind: "agent", Role: policy.RoleMember}, policy.CheckPerson},
		{"a viewer", policy.Decider{ID: "v", Name: "vic", Kind: "person", Role: policy.RoleViewer}, policy.CheckCapability},
		{"the requester", policy.Decider{ID: "prin_agent", Name: "ward_bot", Kind: "person", Role: policy.RoleMember}, policy.CheckRequester},
		{"out of scope", scoped, policy.CheckScope},
		{"not an approver", person("carol"), policy.CheckApprovers},
	}
	for _, tt := range tests {
		r := policy.Decide(tt.d, it)
		if tt.check == policy.CheckAllowed {
			if r != nil {
				t.Errorf("%s: Decide = %+v, want nil (allowed)", tt.name, r)
			}
			continue
		}
		if r == nil || r.Check != tt.check || !strings.HasPrefix(r.Message, "Access denied: ") {
			t.Errorf("%s: Decide = %+v, want a %v refusal saying Access denied: …", tt.name, r, tt.check)
			continue
		}
		err := error(&policy.Error{Kind: policy.KindDenied, Msg: r.Message, Err: r})
		var as *policy.Refusal
		if !errors.Is(err, tt.check) || !errors.As(err, &as) || as != r {
			t.Errorf("%s: the carried refusal is not errors.Is %v and errors.As *Refusal", tt.name, tt.check)
		}
		if got, want := errors.Is(err, policy.CheckStepUp), tt.check == policy.CheckStepUp; got != want {
			t.Errorf("%s: errors.Is(err, CheckStepUp) = %v, want %v", tt.name, got, want)
		}
		if r.Error() != r.Message || tt.check.Error() == "" {
			t.Errorf("%s: Error() = %q and the check's %q, want the message and a name", tt.name, r.Error(), tt.check.Error())
		}
	}
}

// The one rule for who may decide, as a value: nil when the person may
// decide, else the refusal, an error whose check says which rule refused.
func ExampleDecide() {
	item := policy.Decidable{Ref: "req_7", RequesterID: "prin_agent", RequesterName: "ward_bot", SpaceUserID: "patient_42"}
	for _, d := range []policy.Decider{
		{ID: "prin_agent", Name: "ward_bot", Kind: "agent", Role: policy.RoleAgent},
		{ID: "prin_2", Name: "dr_jones", Kind: "person", Role: policy.RoleMember, Scopes: []string{"patient_7"}},
		{ID: "prin_1", Name: "dr_smith", Kind: "person", Role: policy.RoleMember},
	} {
		r := policy.Decide(d, item)
		if r == nil {
			fmt.Printf("%s: may decide\n", d.Name)
			continue
		}
		fmt.Printf("%s: refused (%v), out of scope: %v\n", d.Name, r.Check, errors.Is(r, policy.CheckScope))
	}
	// Output:
	// ward_bot: refused (not a person), out of scope: false
	// dr_jones: refused (out of scope), out of scope: true
	// dr_smith: may decide
}
