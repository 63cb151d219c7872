package actiontools

import (
	"fmt"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// maxWithdrawScan bounds the open items one suspension looks through for
// the person's approvals; the deciding transaction withdraws the rest
// (withdrawSuspended), so none ever counts.
const maxWithdrawScan = 10000

// withdrawOnSuspend is the bot's suspend hook: in the suspending
// transaction, the suspended person's counting approvals on every pending
// action and consent request stop counting (approvals.Request.Withdraw),
// audited, with the item's cards updated to the new tally; and every live
// standing grant they made is revoked (a grant already approves nothing
// while its maker is suspended, Chat.Current; revoked, it stays ended
// after a reactivation).
func (s *Service) withdrawOnSuspend(tx *bot.Tx, name, why string) error {
	if err := revokeGrantsOf(tx, name, why); err != nil {
		return err
	}
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

// revokeGrantsOf revokes the live grants made by the person named name.
func revokeGrantsOf(tx *bot.Tx, name, why string) error {
	now := tx.Call().Now
	gs, err := approvals.ListGrants(tx, maxWithdrawScan, func(g *approvals.Grant) bool {
		return g.Live(now) && policy.SamePrincipal("", g.CreatedBy.Name, "", name)
	})
	if err != nil {
		return err
	}
	by := party(tx.Call().Caller)
	for i := range gs {
		g := &gs[i]
		g.Revoked, g.RevokedBy, g.RevokedAt = true, by, now
		if err := approvals.PutGrant(tx, g); err != nil {
			return err
		}
		if err := tx.Audit("grant_revoked", fmt.Sprintf("%s (%s of %s, made by %s on %s, used %d time(s)) revoked: %s", g.Name(), g.Kind, callName(g.Tool, g.Command), g.CreatedBy.Display, g.FromRequest, g.Uses, why)); err != nil {
			return err
		}
		if g.ItemID != 0 {
			if err := tx.Emit(g.ItemID, bot.EventNote, fmt.Sprintf("%s was revoked: %s; matching calls wait for a person again.", g.Name(), why)); err != nil {
				return err
			}
		}
	}
	return nil
}
