package actiontools

import (
	"fmt"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
)

// maxWithdrawScan bounds the open items one suspension looks through for
// the person's approvals; the deciding transaction withdraws the rest
// (withdrawSuspended), so none ever counts.
const maxWithdrawScan = 10000

// withdrawOnSuspend is the bot's suspend hook: in the suspending
// transaction, the suspended person's counting approvals on every pending
// action and consent request stop counting (approvals.Request.Withdraw),
// audited, with the item's cards updated to the new tally.
func (s *Service) withdrawOnSuspend(tx *bot.Tx, name, why string) error {
	for _, kind := range []bot.ItemKind{bot.KindAction, bot.KindConsent} {
		recs, err := tx.OpenItemsOf(kind, maxWithdrawScan)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			r, err := approvals.LoadRequest(tx, rec.Key)
			if err != nil {
				return err
			}
			if r == nil || !r.Withdraw(name, why) {
				continue
			}
			if err := withdrawn(tx, r, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// withdrawSuspended withdraws, in the deciding transaction, the counting
// approvals on r of voters suspended now, so that a quorum is never met
// with the vote of someone the directory deactivated (whatever the
// suspending transaction found). It reports whether r changed.
func withdrawSuspended(tx *bot.Tx, r *approvals.Request) (bool, error) {
	changed := false
	for _, name := range r.Voters() {
		sus, err := bot.SuspensionOf(tx, name)
		if err != nil {
			return false, err
		}
		if sus == nil {
			continue
		}
		why := fmt.Sprintf("%s was suspended (%s)", name, sus.String())
		if r.Withdraw(name, why) {
			changed = true
			if err := tx.Audit(string(r.Kind)+"_vote_withdrawn", fmt.Sprintf("%s: %s's approval no longer counts: %s: %s", r.ID, name, why, r.Tally())); err != nil {
				return false, err
			}
		}
	}
	return changed, nil
}

// withdrawn stores r after a withdrawal, audits it and updates its cards.
func withdrawn(tx *bot.Tx, r *approvals.Request, why string) error {
	if err := approvals.PutRequest(tx, r, r.DueAt); err != nil {
		return err
	}
	if err := tx.Audit(string(r.Kind)+"_vote_withdrawn", fmt.Sprintf("%s: approval no longer counts: %s: %s", r.ID, why, r.Tally())); err != nil {
		return err
	}
	if r.ItemID == 0 {
		return nil
	}
	return tx.Emit(r.ItemID, bot.EventUpdated, r.Tally())
}
