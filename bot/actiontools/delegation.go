package actiontools

import (
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// This file is what action and consent requests do with delegation
// (policy/delegation.go, bot/delegations.go): a vote cast by a delegate
// names the delegator it was cast for, and the card of a pending request
// shows the delegations of the people who may decide it.

var _ bot.DecidableSource = itemSource{}

// voter is the party of the caller's vote on r, which the one rule has
// allowed: cast for the delegator whose approvals the caller uses
// (policy.ActingFor), or in the caller's own right. A standing grant is
// never made under a delegation: it would outlive it.
func voter(c *bot.Call, r *approvals.Request, approve, grant bool) (approvals.Party, error) {
	it := r.Decidable()
	it.At = c.Now
	if !approve {
		it.StepUp, it.MinAssurance, it.EarlierStages, it.Counted = 0, "", nil, nil
	}
	p := party(c.Caller)
	x := policy.ActingFor(c.Caller.Decider(), it)
	if x == nil {
		return p, nil
	}
	if grant {
		return p, bot.Invalid("grant", "you decide %s for %s, under their delegation, and a standing grant would outlive it; approve without a grant, or let %s or another approver make one", r.ID, x.Name, x.Name)
	}
	return p.ForDelegator(x.Name), nil
}

// Decidable is the pending request behind rec as the one decision rule
// sees it (its approvers, its open stage); ok is false once it is
// decided.
func (itemSource) Decidable(tx kv.Tx, rec bot.ItemRecord) (policy.Decidable, bool, error) {
	if rec.Kind != bot.KindAction && rec.Kind != bot.KindConsent {
		return policy.Decidable{}, false, nil
	}
	r, err := approvals.LoadRequest(tx, rec.Key)
	if err != nil || r == nil || r.Status != approvals.StatusPending {
		return policy.Decidable{}, false, err
	}
	return r.Decidable(), true, nil
}
