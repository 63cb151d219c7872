package actiontools

import (
	"fmt"

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

// emptyGroups adds to the card of a pending request a line naming the
// directory's groups among the approvers of d (the open stage's) that
// list nobody now: nobody may approve for them until the directory adds
// someone (bot.EmptyDirectoryGroups).
func (s *Service) emptyGroups(tx kv.Tx, it *bot.Item, d policy.Decidable) error {
	if len(d.Approvers.Groups) == 0 {
		return nil
	}
	empty, err := s.b.EmptyDirectoryGroups(tx, d.Approvers)
	if err != nil || len(empty) == 0 {
		return err
	}
	who := "group " + orList(empty)
	if d.Stage != "" {
		who += " (the open stage: " + d.Stage + ")"
	}
	it.Fields = append(it.Fields, bot.Field{Label: "No approvers yet", Value: fmt.Sprintf("the organisation's directory lists nobody in %s now; until it adds someone (SCIM /scim/v2/Groups), nobody approves for that group", who)})
	return nil
}
