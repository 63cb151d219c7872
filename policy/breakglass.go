package policy

import (
	"fmt"
	"strings"
	"time"
)

// BreakGlass is the decision rule's one typed exception to "a request is
// never decided by its own requester" (break_glass: in config.yaml). A
// person who asked for a call themselves (a person-driven agent run: the
// call was made with that person's own key or token, so the request's
// requester is a principal of kind person) may approve it alone, when the
// tool is listed under break_glass.tools, with a reason and a fresh
// step-up, and only while no earlier break-glass of theirs has a review
// overdue. An agent never breaks glass: neither as the decider (the
// person check) nor as the requester (RequesterKind).
//
// The exception is asked for explicitly: a caller sets Decidable.BreakGlass
// only for an approval its decider asked to make as break-glass; without it
// the requester check refuses as always. Every other check of the rule
// still applies, in its order (identity, suspension, person, capability,
// scope, approvers, stage, step-up, assurance): the breaker must be someone
// who could approve the request were it another's.
type BreakGlass struct {
	// Listed reports whether the request's tool is listed under
	// break_glass.tools.
	Listed bool
	// Reason is the breaker's reason: mandatory (blank refuses).
	Reason string
	// RequesterKind is the kind of the principal that asked (person,
	// agent or service): only a person's own request is broken open.
	RequesterKind string
	// Overdue, when set, names the decider's earlier break-glass review
	// that is past its deadline and not yet countersigned ("rev_… due
	// 2026-12-02T10:00:00Z"): it blocks every further break-glass of theirs
	// until the reviewers clear it. The core reads it in the deciding
	// transaction.
	Overdue string
	// StepUp is how fresh the breaker's last strong sign-in must be
	// (break_glass.step_up); 0 means DefaultFreshness. A break-glass
	// approval always needs a step-up, whatever the tool's own step_up.
	StepUp time.Duration
}

// CheckBreakGlass is the check that refused a break-glass approval for a
// reason of the exception's own (not the requester, an agent's request,
// a tool not listed, no reason, an overdue review). Its value stands apart
// from the checks of decide.go so that checks added there never take it.
const CheckBreakGlass DecisionCheck = 100

// breakGlassCheckName names CheckBreakGlass (DecisionCheck.String).
const breakGlassCheckName = "break-glass refused"

// MaxBreakGlassReason bounds a break-glass reason, as a denial's.
const MaxBreakGlassReason = 2000

// BreakGlassStepUp is the step-up window of a break-glass approval: the
// stricter of the item's own (itemStepUp; 0: none) and break_glass's
// (breakGlass; 0: DefaultFreshness). It is always positive.
func BreakGlassStepUp(itemStepUp, breakGlass time.Duration) time.Duration {
	if breakGlass <= 0 {
		breakGlass = DefaultFreshness
	}
	if itemStepUp > 0 {
		return min(itemStepUp, breakGlass)
	}
	return breakGlass
}

// checkBreakGlass is checkDecision for an approval asked for as
// break-glass (it.BreakGlass set): the rule's checks in their order, with
// the requester check replaced by the exception's own, and the step-up
// made mandatory.
func checkBreakGlass(d Decider, it Decidable) Refusal {
	bg := *it.BreakGlass
	base := it
	base.BreakGlass = nil
	base.RequesterID, base.RequesterName = "", "" // the one check excepted, when the exception holds (below)
	base.StepUp = BreakGlassStepUp(base.StepUp, bg.StepUp)
	d.Delegators = nil // the breaker's own rights only, never a delegation's (delegation.go)
	r := checkDecision(d, base)
	switch r.Check {
	case CheckIdentity, CheckSuspended, CheckPerson, CheckCapability:
		return r // the checks made before the requester's
	}
	display := d.Display
	if display == "" {
		display = fmt.Sprintf("%s [%s]", d.Name, d.ID)
	}
	refuse := func(format string, a ...any) Refusal {
		return Refusal{Check: CheckBreakGlass, Message: "Access denied: " + fmt.Sprintf(format, a...)}
	}
	switch {
	case !SamePrincipal(it.RequesterID, it.RequesterName, d.ID, d.Name):
		return refuse("break-glass is a person's approval of their own request, and %s was requested by %s, not by %s. Approve it the ordinary way, without break-glass.", it.Ref, it.RequesterDisplay, display)
	case bg.RequesterKind != "person":
		kind := bg.RequesterKind
		if kind == "" {
			kind = "unclassified"
		}
		return refuse("%s was requested by a%s %s principal (%s), and an agent never breaks glass: only a person's own request (made with their own key or token) may be approved by them. Another approver decides it.", it.Ref, anOrA(kind), kind, it.RequesterDisplay)
	case !bg.Listed:
		what := it.ApproversOf
		if what == "" {
			what = it.Ref
		}
		return refuse("break-glass is not allowed for %s: only the tools listed under break_glass.tools in config.yaml may be. Another approver decides it.", what)
	case strings.TrimSpace(bg.Reason) == "":
		return refuse("breaking glass on %s needs a reason, which every approver and the review see. Say why it cannot wait for another approver; nothing was recorded.", it.Ref)
	case len(bg.Reason) > MaxBreakGlassReason:
		return refuse("the reason for breaking glass on %s is longer than %d characters; shorten it. Nothing was recorded.", it.Ref, MaxBreakGlassReason)
	case strings.TrimSpace(bg.Overdue) != "":
		return refuse("%s may not break glass again while the review of their earlier break-glass (%s) is overdue. The reviewers countersign it first; meanwhile another approver decides %s.", display, strings.TrimSpace(bg.Overdue), it.Ref)
	}
	return r
}
