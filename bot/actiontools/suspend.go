package actiontools

import (
	"fmt"
	"strings"

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
		if did, later := r.VoidApprovals(name, why); did {
			changed = true
			if err := tx.Audit(string(r.Kind)+"_vote_void", fmt.Sprintf("%s: %s's approval no longer counts (%s): %s", r.ID, name, why, r.Tally())); err != nil {
				return false, err
			}
			if note := restageNote(r, name, later); note != "" {
				if err := tx.Audit("stage_reopened", r.ID+": "+note); err != nil {
					return false, err
				}
				if r.ItemID != 0 {
					if err := tx.Emit(r.ItemID, bot.EventNote, note); err != nil {
						return false, err
					}
				}
			}
		}
	}
	return changed, nil
}

// restageNote says, for the card's thread and the audit, that staged
// request r went back to its open stage when name's approval was voided,
// and whose later-stage approvals no longer count (later); "" when no
// later approval was voided.
func restageNote(r *approvals.Request, name string, later []string) string {
	if len(later) == 0 || len(r.Stages) == 0 {
		return ""
	}
	i := min(r.OpenStage(), len(r.Stages)-1)
	return fmt.Sprintf("%s's approval no longer counts, so %s is back at the %s stage (%d of %d): the approvals of the stages after it (%s) no longer count, and those stages sign off again once it is approved.",
		name, r.ID, r.Stages[i].Name, i+1, len(r.Stages), strings.Join(later, ", "))
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
