package actiontools

import (
	"fmt"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// maxGrantScan bounds the grants one suspension looks through.
const maxGrantScan = 10000

// voidSuspended voids, in the deciding transaction, the counting
// approvals on r of voters suspended now (approvals.Request.VoidVotes),
// audited, so that a quorum is never met with the vote of someone
// suspended, whichever of the two transactions committed first. It
// reports whether r changed.
func voidSuspended(tx *bot.Tx, r *approvals.Request) (bool, error) {
	changed := false
	for _, name := range r.Voters() {
		sus, err := bot.LoadSuspension(tx, name)
		if err != nil {
			return false, err
		}
		if sus == nil {
			continue
		}
		why := "suspended from approving: " + sus.Why()
		if r.VoidVotes(name, why) {
			changed = true
			if err := tx.Audit(string(r.Kind)+"_vote_void", fmt.Sprintf("%s: %s's approval no longer counts (%s): %s", r.ID, name, why, r.Tally())); err != nil {
				return false, err
			}
		}
	}
	return changed, nil
}

// revokeGrantsOf is the bot's suspend hook: the live standing grants the
// suspended person made are revoked, audited, with a note in the card's
// thread. (While the person is suspended a grant of theirs approves
// nothing anyway, Chat.Current; revoked, it stays ended once the
// suspension is lifted.)
func revokeGrantsOf(tx *bot.Tx, name, why string) error {
	now := tx.Call().Now
	gs, err := approvals.ListGrants(tx, maxGrantScan, func(g *approvals.Grant) bool {
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
		if err := tx.Audit("grant_revoked", fmt.Sprintf("%s (%s of %s, made by %s on %s, used %d time(s)) revoked: %s %s", g.Name(), g.Kind, callName(g.Tool, g.Command), g.CreatedBy.Display, g.FromRequest, g.Uses, name, why)); err != nil {
			return err
		}
		if g.ItemID != 0 {
			if err := tx.Emit(g.ItemID, bot.EventNote, fmt.Sprintf("%s was revoked: %s is %s; matching calls wait for a person again.", g.Name(), name, why)); err != nil {
				return err
			}
		}
	}
	return nil
}
