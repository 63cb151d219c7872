package approvals

import (
	"slices"
	"strings"

	"github.com/countersign/countersign/policy"
)

// This file is what a request keeps of delegation (policy/delegation.go):
// a vote cast by a delegate names the delegator it was cast for
// (Party.For), the approvals that count now are given to the decision
// rule with it (Decidable.Counted), so that a delegator's approval counts
// once, and a suspension of the delegator voids the votes cast for them.

// Label is the party as a tally names it: "bob", or "bob for alice" for a
// vote cast under alice's delegation.
func (p Party) Label() string {
	if strings.TrimSpace(p.For) == "" {
		return p.Name
	}
	return p.Name + " for " + p.For
}

// castFor reports whether the vote of p was cast for the person named
// name, under their delegation.
func (p Party) castFor(name string) bool {
	return strings.TrimSpace(p.For) != "" && strings.EqualFold(p.For, name)
}

// ForDelegator returns p as the voter who decides for delegator (under
// their delegation): For set, and Display ending "for <delegator>", so
// every record that names the voter (the tally, decided_by, the audit,
// the receipt) says for whom. delegator "" returns p unchanged.
func (p Party) ForDelegator(delegator string) Party {
	if strings.TrimSpace(delegator) == "" {
		return p
	}
	p.For = delegator
	p.Display += " for " + delegator
	return p
}

// counted are the approvals that count now towards r's open stage (or
// its quorum), for the decision rule.
func (r *Request) counted() []policy.StageApproval {
	var out []policy.StageApproval
	if len(r.Stages) > 0 {
		i := r.OpenStage()
		if i >= len(r.Stages) {
			return nil
		}
		for _, p := range r.StageApprovers(i) {
			out = append(out, policy.StageApproval{ID: p.ID, Name: p.Name, Stage: r.Stages[i].Name, For: p.For})
		}
		return out
	}
	var seen []Party
	for _, v := range r.Votes {
		if r.counts(v) && !slices.ContainsFunc(seen, v.By.Same) {
			seen = append(seen, v.By)
			out = append(out, policy.StageApproval{ID: v.By.ID, Name: v.By.Name, For: v.By.For})
		}
	}
	return out
}
