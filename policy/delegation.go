package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file is delegation as the one decision rule sees it: a person
// (the delegator) lends their approvals, for a window, to another person
// (the delegate), who may then decide what the delegator may decide.
//
// A delegation is never wider than either person's own rights. The
// delegate decides an item in the delegator's name only when
//
//   - the delegate passes every check of the rule on their own except the
//     item's approvers: an identified, unsuspended person holding approve,
//     not the item's requester, the item's space in their scope, not an
//     approver of an earlier stage, and stepped up with their own sign-in
//     when the item needs it (the delegator's session lends nothing);
//   - the delegator passes every check of the rule as they stand at the
//     decision (role, scopes, groups, on-call turns, suspension, not the
//     requester, not an approver of an earlier stage), the step-up and
//     assurance checks aside, since those are about the session that
//     decides, which is the delegate's;
//   - the delegator's approval does not count already (their own, or one
//     another delegate cast for them): a delegation lends one person's
//     approval, never a second one.
//
// A delegation is not passed on: the delegate's own delegators are not
// the delegator's (alice to bob to carol gives carol nothing of alice's).
// A delegation reaches only an item that records for whom a vote was
// cast and what counts already (Decidable.Delegable: action and consent
// requests); on any other (a break-glass review, a memory change) the
// decider decides in their own right only.
//
// A person who decides in their own right (among the item's approvers)
// decides as themselves, whatever is lent to them. A break-glass approval
// (breakglass.go) rests on the breaker's own rights only: a delegation
// never lets someone break glass on their own request.

// MaxDelegation is the longest window a delegation may have: a person
// away longer is replaced in the configuration (groups:, oncall:,
// tools[].approvers), not by a delegation.
const MaxDelegation = 14 * 24 * time.Hour

// Delegator is a person who lent their approvals to the decider: as the
// decision rule sees them at the time of the decision (their role,
// scopes, groups and suspension now, read in the deciding transaction),
// and until when the delegation runs.
type Delegator struct {
	Decider
	Until time.Time
}

// Delegation is one person's approvals lent to another for a window:
// From lends to To from Start until Until (Until itself excluded).
type Delegation struct {
	From  string    `json:"from"`
	To    string    `json:"to"`
	Start time.Time `json:"start"`
	Until time.Time `json:"until"`
}

// ActiveAt reports whether the delegation runs at now.
func (d Delegation) ActiveAt(now time.Time) bool {
	return !now.Before(d.Start) && now.Before(d.Until)
}

// CheckWindow checks a delegation's window starting at now: it must end
// after now and within MaxDelegation of it. It returns the problem, or
// "" when the window is fine.
func CheckWindow(now, until time.Time) string {
	switch {
	case !until.After(now):
		return fmt.Sprintf("the delegation would end at %s, which is not after now (%s); give a time to come", until.UTC().Format("2006-01-02 15:04 UTC"), now.UTC().Format("2006-01-02 15:04 UTC"))
	case until.Sub(now) > MaxDelegation:
		d := until.Sub(now).Round(time.Hour)
		return fmt.Sprintf("a delegation runs at most 14 days, and this one would run %d days %d hours; for a longer absence change who approves in config.yaml (groups:, oncall:, tools[].approvers)", int(d.Hours())/24, int(d.Hours())%24)
	}
	return ""
}

// ActingFor returns the delegator in whose name d decides it: nil when d
// decides in their own right (they are among its approvers), or when no
// delegation lent to d reaches it (see the rules at the top of this
// file). The rule (Decide) allows d only if one of the two holds; a
// surface records the vote as d's, cast for the delegator returned.
func ActingFor(d Decider, it Decidable) *Delegator {
	if it.Approvers.allows(d) {
		return nil
	}
	return lentBy(d, it)
}

// lentBy is the first delegator (by name) whose approvals reach it for d.
func lentBy(d Decider, it Decidable) *Delegator {
	if len(d.Delegators) == 0 || !it.Delegable {
		return nil
	}
	lent := it
	lent.StepUp, lent.MinAssurance = 0, "" // the delegate's own sign-in is checked, not the delegator's
	lent.Counted = nil                     // what counts already is checked below, for this delegate
	xs := slices.Clone(d.Delegators)
	slices.SortFunc(xs, func(a, b Delegator) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	for i := range xs {
		x := xs[i]
		if !it.At.IsZero() && !it.At.Before(x.Until) {
			continue
		}
		if SamePrincipal(x.ID, x.Name, d.ID, d.Name) {
			continue // never one's own delegator
		}
		xd := x.Decider
		xd.Delegators = nil // not passed on
		if Decide(xd, lent) != nil {
			continue
		}
		if slices.ContainsFunc(it.Counted, func(a StageApproval) bool {
			mine := SamePrincipal(a.ID, a.Name, d.ID, d.Name) && strings.EqualFold(a.For, x.Name)
			return !mine && (SamePrincipal(a.ID, a.Name, x.ID, x.Name) || strings.EqualFold(a.For, x.Name))
		}) {
			continue // the delegator's approval counts already
		}
		return &x
	}
	return nil
}

// approvedFor is the approval that counts already on it, cast for d by
// someone else under d's delegation; nil when there is none.
func approvedFor(d Decider, it Decidable) *StageApproval {
	for i, a := range it.Counted {
		if strings.TrimSpace(a.For) != "" && strings.EqualFold(a.For, d.Name) && !SamePrincipal(a.ID, a.Name, d.ID, d.Name) {
			return &it.Counted[i]
		}
	}
	return nil
}

// approvedStage reports whether a approved an earlier stage as d, or for
// d under d's delegation.
func approvedStage(a StageApproval, d Decider) bool {
	return SamePrincipal(a.ID, a.Name, d.ID, d.Name) || (strings.TrimSpace(a.For) != "" && strings.EqualFold(a.For, d.Name))
}

// delegationHint is what a refusal of d by the approvers check adds when
// d holds delegations that do not reach the item: "" when d holds none.
func delegationHint(d Decider) string {
	if len(d.Delegators) == 0 {
		return ""
	}
	names := make([]string, len(d.Delegators))
	for i, x := range d.Delegators {
		names[i] = x.Name
	}
	slices.Sort(names)
	return fmt.Sprintf(" The approvals lent to %s (by %s) do not reach it either: a delegation lends only what its delegator may decide themselves, once.", d.Name, strings.Join(names, ", "))
}

// delegationRefusal is the refusal of d whose approval a delegate already
// cast for them (a).
func delegationRefusal(d Decider, it Decidable, a *StageApproval, display string) string {
	return fmt.Sprintf("Access denied: %s approved %s for %s, under %s's delegation, and that approval counts; one person's approval counts once, so %s's own would count twice. Another approver decides what is still open.",
		a.Name, it.Ref, d.Name, d.Name, display)
}
