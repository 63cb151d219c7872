package actiontools

import (
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

var (
	_ bot.VoteRechecker = itemSource{}
	_ bot.VoteRechecker = reviewSource{}
)

// RecheckVotes makes the approvals of the person named name on the
// pending action or consent request behind rec stop counting where they
// count for approvers naming group that no longer include the person
// (approvals.Request.VoidIneligible): the directory removed them from the
// group. A request signed off in stages goes back to the stage that lost
// an approval (restageNote).
func (itemSource) RecheckVotes(tx kv.Tx, rec bot.ItemRecord, name, group string, includes func(policy.Approvers) bool, why string) (bool, string, error) {
	if rec.Kind != bot.KindAction && rec.Kind != bot.KindConsent {
		return false, "", nil
	}
	r, err := approvals.LoadRequest(tx, rec.Key)
	if err != nil || r == nil {
		return false, "", err
	}
	changed, later := r.VoidIneligible(name, group, includes, why)
	if !changed {
		return false, "", nil
	}
	return true, restageNote(r, name, later), approvals.PutRequest(tx, r, r.DueAt)
}

// RecheckVotes makes the countersignatures of the person named name on
// the open review behind rec stop counting when the review's approvers
// name group and no longer include them.
func (reviewSource) RecheckVotes(tx kv.Tx, rec bot.ItemRecord, name, group string, includes func(policy.Approvers) bool, why string) (bool, string, error) {
	rv, err := approvals.LoadReview(tx, rec.Key)
	if err != nil || rv == nil || !approvals.NamesGroup(rv.Approvers, group) || includes(rv.Approvers) || !rv.VoidVotes(name, why) {
		return false, "", err
	}
	return true, "", approvals.PutReview(tx, rv)
}
