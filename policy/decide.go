package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Decider is who attempts a decision: the principal behind the call, with
// the chat identity it was mapped from already folded in (a chat user acts
// with the mapped principal's role and scopes).
type Decider struct {
	ID      string   // principal id ("prin_…", or "chat:<name>" for a chat mapping)
	Name    string   // principal name
	Display string   // "name [id]", as the decider is shown
	Kind    string   // person, agent or service
	Role    Role     // the principal's role
	Scopes  []string // the user_ids it may touch; empty = all
	// AuthAt is when the decider last authenticated strongly (a sign-in at
	// the identity provider), and AuthMethod how ("oidc"). Zero for chat
	// identities, API keys and sign-in links: they never carry one.
	AuthAt     time.Time
	AuthMethod string
	// Groups are the approver groups the decider belongs to at the time
	// of the decision: the configured groups that list it, and those its
	// identity provider asserts (the OIDC groups claim of a console
	// sign-in). Names compare case-insensitively.
	Groups []string
	// Suspended, when set, says why the decider is suspended from
	// approving (their chat account was deactivated or left the
	// workspace): the rule refuses them everything until an admin lifts
	// it. The core reads it from the store in the deciding transaction.
	Suspended string
	// Surface is where the decision comes from (web, slack, http, …) and
	// SignIn how a console session was opened (link, oidc): with AuthAt
	// and AuthMethod they make the decision's assurance (AssuranceOf).
	Surface string
	SignIn  string
	// Delegators are the people who lent the decider their approvals by
	// a delegation running at the time of the decision, each as they
	// stand now (delegation.go); read in the deciding transaction.
	Delegators []Delegator
}

// Approvers says who may decide an item: any principal holding one of
// Roles, named in Principals, or belonging to one of Groups. All empty:
// anyone holding approve.
type Approvers struct {
	Roles      []string `json:"roles,omitempty"`
	Principals []string `json:"principals,omitempty"`
	Groups     []string `json:"groups,omitempty"`
}

// IsZero reports whether a names nobody in particular (anyone holding
// approve decides).
func (a Approvers) IsZero() bool {
	return len(a.Roles) == 0 && len(a.Principals) == 0 && len(a.Groups) == 0
}

// String renders the approvers for a refusal.
func (a Approvers) String() string {
	var parts []string
	if len(a.Roles) > 0 {
		parts = append(parts, "roles "+strings.Join(a.Roles, ", "))
	}
	if len(a.Principals) > 0 {
		parts = append(parts, "principals "+strings.Join(a.Principals, ", "))
	}
	if len(a.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(a.Groups, ", "))
	}
	if len(parts) == 0 {
		return "anyone holding the approve capability"
	}
	return strings.Join(parts, " or ")
}

// Includes reports whether decider d is among the approvers as d stands
// (role, name, groups): the check of the rule's approvers on its own,
// for the core to tell whether an approval already cast still has its
// place once the voter's groups changed (a directory removed them).
func (a Approvers) Includes(d Decider) bool { return a.allows(d) }

// allows reports whether decider d is among the approvers: by role, by
// name, or by one of the groups it belongs to now (all compare
// case-insensitively).
func (a Approvers) allows(d Decider) bool {
	if a.IsZero() {
		return true
	}
	if slices.ContainsFunc(a.Roles, func(r string) bool { return strings.EqualFold(r, string(d.Role)) }) {
		return true
	}
	if slices.ContainsFunc(a.Principals, func(p string) bool { return strings.EqualFold(p, d.Name) }) {
		return true
	}
	return slices.ContainsFunc(a.Groups, func(g string) bool {
		return slices.ContainsFunc(d.Groups, func(h string) bool { return strings.EqualFold(g, h) })
	})
}

// Decidable is what a decision is taken on, as the decision rule needs it.
type Decidable struct {
	// Ref names the item in a refusal: "req_…", "#2".
	Ref string
	// RequesterID, RequesterName and RequesterDisplay identify who asked
	// (the agent that proposed the change or requested the action). All
	// empty when nobody but the decider asked (a write as a trusted
	// source): the requester check is then skipped.
	RequesterID, RequesterName, RequesterDisplay string
	// SpaceUserID is the user_id of the memory space the item belongs to.
	SpaceUserID string
	// Approvers are the item's eligible approvers; zero means anyone
	// holding approve.
	Approvers Approvers
	// ApproversOf names what the approvers decide in a refusal
	// ("delete_database requests"); empty: Ref.
	ApproversOf string
	// StepUp, when positive, is how fresh the decider's last strong
	// authentication (Decider.AuthAt) must be at At for this decision:
	// set for approving an item that requires step-up, never for
	// refusing one (refusing is never held back).
	StepUp time.Duration
	// At is when the decision is taken (the caller's clock: policy reads
	// none). A StepUp with a zero At refuses.
	At time.Time
	// Stage names the stage of an item signed off in ordered stages that
	// is open now ("pharmacist, stage 2 of 2"); Approvers and StepUp are
	// then that stage's. Empty for an item without stages.
	Stage string
	// EarlierStages are the people who approved an earlier stage of the
	// item (of the arguments and round now up for approval): one person
	// approves at most one stage, so they may not approve this one. Set
	// for an approval only (refusing is never held back).
	EarlierStages []StageApproval
	// MinAssurance, when set, is the least assurance an approval needs
	// (AssuranceOf the decider, fresh within StepUp or DefaultFreshness):
	// tools[].step_up.method. Set for approving, never for refusing.
	MinAssurance Assurance
	// Counted are the approvals that count now towards the open stage (or
	// the item's quorum), with whom each was cast for under a delegation:
	// a delegator's approval counts once (delegation.go). Set for an
	// approval only.
	Counted []StageApproval
	// Delegable says a delegate may decide the item in a delegator's name
	// (delegation.go): set by an item that records for whom a vote was
	// cast and gives Counted (action and consent requests). Unset, the
	// rule lends nothing: the decider decides in their own right only.
	Delegable bool
	// BreakGlass, when set, asks for the rule's one exception to the
	// requester check (breakglass.go): set for an approval its decider
	// asked to make as break-glass, never otherwise.
	BreakGlass *BreakGlass
}

// StageApproval is one person's approval of a stage, as the decision rule
// needs it.
type StageApproval struct {
	ID, Name string
	Stage    string // the stage's name
	// For is the delegator the approval was cast for, under their
	// delegation ("" for one cast in the approver's own right).
	For string
}

// StepUpSkew is how far in the future of At a decider's AuthAt may lie
// and still count (clocks of replicas and identity providers differ a
// little); further is refused.
const StepUpSkew = time.Minute

// SteppedUp reports whether a strong authentication at authAt is fresh
// enough for a step-up of within at time at.
func SteppedUp(authAt time.Time, within time.Duration, at time.Time) bool {
	if authAt.IsZero() || at.IsZero() || within <= 0 {
		return false
	}
	return !authAt.Before(at.Add(-within)) && !authAt.After(at.Add(StepUpSkew))
}

// StepUpRequired starts the step-up refusal (after "Access denied: "). A
// surface recognises the refusal by its check (errors.Is(err,
// CheckStepUp)), not by this text.
const StepUpRequired = "step-up required: approve in the console after signing in again."

// SamePrincipal reports whether two principals are the same: the same id,
// or the same name (case-insensitive), since a person may hold an API key
// and a chat identity under one name.
func SamePrincipal(aID, aName, bID, bName string) bool {
	return (aID != "" && aID == bID) || (strings.TrimSpace(aName) != "" && strings.EqualFold(aName, bName))
}

// DecisionCheck names the check of the decision rule that refused.
type DecisionCheck int

// The checks of the decision rule, in the order they are made.
const (
	CheckAllowed    DecisionCheck = iota // no check refused: the decider may decide
	CheckIdentity                        // the caller has no authenticated identity
	CheckPerson                          // the caller is an agent or a service
	CheckCapability                      // the caller's role does not hold approve
	CheckRequester                       // the caller asked for it
	CheckScope                           // the item's space is outside the caller's scope
	CheckApprovers                       // the caller is not among the item's approvers
	CheckStage                           // the caller approved an earlier stage of the item
	CheckStepUp                          // approving needs a fresh sign-in the caller does not have
	// CheckSuspended: the caller is suspended from approving (Decider.Suspended).
	// It is made right after the identity check; listed last so the other
	// checks keep their values.
	CheckSuspended
	// CheckAssurance: approving needs a stronger authentication than the
	// caller's (Decidable.MinAssurance); checked last.
	CheckAssurance
	// CheckDelegation: the caller's approval counts already, cast for
	// them by a delegate (delegation.go).
	CheckDelegation
)

// checkNames are the DecisionChecks as errors and logs name them.
var checkNames = [...]string{
	CheckAllowed:    "allowed",
	CheckIdentity:   "no identity",
	CheckPerson:     "not a person",
	CheckCapability: "no approve capability",
	CheckRequester:  "own request",
	CheckScope:      "out of scope",
	CheckApprovers:  "not an eligible approver",
	CheckStepUp:     "step-up required",
	CheckSuspended:  "suspended",
	CheckAssurance:  "authentication too weak",
	CheckDelegation: "approved by a delegate",
}

// String names the check ("step-up required").
func (c DecisionCheck) String() string {
	if c == CheckBreakGlass {
		return breakGlassCheckName
	}
	if int(c) < len(checkNames) && checkNames[c] != "" {
		return checkNames[c]
	}
	return fmt.Sprintf("DecisionCheck(%d)", int(c))
}

// Error makes a check an error value to compare a refusal with: a
// *Refusal (and an *Error carrying one) unwraps to its check, so
// errors.Is(err, CheckStepUp) reports a step-up refusal.
func (c DecisionCheck) Error() string { return c.String() }

// Refusal is the decision rule's answer: which check refused and the
// refusal to show ("Access denied: …"). A *Refusal is an error; Decide
// returns nil when the rule allows, never an empty Refusal.
type Refusal struct {
	Check   DecisionCheck
	Message string
}

// Error returns the message shown to the decider.
func (r *Refusal) Error() string { return r.Message }

// Unwrap returns the check that refused (errors.Is(err, CheckScope)).
func (r *Refusal) Unwrap() error { return r.Check }

// Decide is the one rule for who may decide anything Countersign
// holds for a person (an action request, a consent request, a question, a
// memory proposal, a write as a trusted source): the decider must be an
// identified person (never an agent or a service principal), hold the
// approve capability, not be the item's requester (by id or name), have the
// item's memory space in scope, and be among the item's eligible approvers.
// It returns nil when d may decide, else the *Refusal: the check that
// refused (Check, itself an error: errors.Is(err, CheckStepUp)) and the
// message to show ("Access denied: …"). The order of the checks is part
// of the contract: identity, suspension, person, capability, requester,
// scope, approvers (of the open stage, for
// an item signed off in stages, with the groups the decider belongs to
// now; or lent to the decider by a delegation, delegation.go), stage (one
// person approves at most one stage), delegation (an approval a delegate
// cast for the decider counts already), step-up (an item that requires
// step-up is approved only by a decider whose last strong authentication
// is within it.StepUp of it.At), assurance (an item with MinAssurance is
// approved only by a decider authenticated at least so, AssuranceOf).
func Decide(d Decider, it Decidable) *Refusal {
	r := checkDecision(d, it)
	if r.Check == CheckAllowed {
		return nil
	}
	return &r
}

// checkDecision is Decide with the zero Refusal (CheckAllowed) for
// allowed.
func checkDecision(d Decider, it Decidable) Refusal {
	if it.BreakGlass != nil {
		return checkBreakGlass(d, it)
	}
	display := d.Display
	if display == "" {
		display = fmt.Sprintf("%s [%s]", d.Name, d.ID)
	}
	switch {
	case strings.TrimSpace(d.ID) == "" || strings.TrimSpace(d.Name) == "":
		return Refusal{Check: CheckIdentity, Message: "Access denied: a decision needs an authenticated identity, and this caller has none. Decide with your own API key or from a mapped chat account."}
	case strings.TrimSpace(d.Suspended) != "":
		return Refusal{Check: CheckSuspended, Message: fmt.Sprintf("Access denied: %s is suspended from approving (%s), so Countersign records no decision of theirs on %s, and their earlier approvals of pending requests no longer count. This is by design; an admin lifts the suspension (lift_suspension) if the account is active again, and another approver decides meanwhile.", display, strings.TrimSpace(d.Suspended), it.Ref)}
	case d.Kind != "person":
		kind := d.Kind
		if kind == "" {
			kind = "unclassified"
		}
		return Refusal{Check: CheckPerson, Message: fmt.Sprintf("Access denied: %s is a%s %s principal. A confirmation is a person's decision from an authenticated session, never an agent's or a service account's; a person with the approve capability decides %s.", display, anOrA(kind), kind, it.Ref)}
	case !Grants(d.Role, CapApprove):
		return Refusal{Check: CheckCapability, Message: fmt.Sprintf("Access denied: deciding %s requires the 'approve' capability; your role(s) ['%s'] do not grant it.", it.Ref, d.Role)}
	case SamePrincipal(it.RequesterID, it.RequesterName, d.ID, d.Name):
		return Refusal{Check: CheckRequester, Message: fmt.Sprintf("Access denied: %s was requested by %s, and a request is never decided by its own requester. Another approver decides it.", it.Ref, it.RequesterDisplay)}
	case !InScope(d.Role, d.Scopes, it.SpaceUserID):
		return Refusal{Check: CheckScope, Message: fmt.Sprintf("Access denied: %s belongs to a memory space outside your assigned scope.", it.Ref)}
	case !it.Approvers.allows(d) && lentBy(d, it) == nil:
		what := it.ApproversOf
		if what == "" {
			what = it.Ref
		}
		if it.Stage != "" {
			return Refusal{Check: CheckApprovers, Message: fmt.Sprintf("Access denied: the open stage of %s (%s) is decided by %s; %s is not among them. Stages are configured under tools[].stages or tools[].rules[].stages in config.yaml.", it.Ref, it.Stage, it.Approvers, display) + delegationHint(d)}
		}
		return Refusal{Check: CheckApprovers, Message: fmt.Sprintf("Access denied: %s are decided by %s; %s is not among them. That is configured per tool under tools[].approvers in config.yaml.", what, it.Approvers, display) + delegationHint(d)}
	case slices.ContainsFunc(it.EarlierStages, func(a StageApproval) bool { return approvedStage(a, d) }):
		i := slices.IndexFunc(it.EarlierStages, func(a StageApproval) bool { return approvedStage(a, d) })
		return Refusal{Check: CheckStage, Message: fmt.Sprintf("Access denied: %s approved the %s stage of %s, and one person approves at most one stage. Another approver decides the open stage (%s).", display, it.EarlierStages[i].Stage, it.Ref, it.Stage)}
	case approvedFor(d, it) != nil:
		return Refusal{Check: CheckDelegation, Message: delegationRefusal(d, it, approvedFor(d, it), display)}
	case it.StepUp > 0 && !SteppedUp(d.AuthAt, it.StepUp, it.At):
		return Refusal{Check: CheckStepUp, Message: stepUpRefusal(d, it, display)}
	case it.MinAssurance != "" && !AssuranceOf(d, it.StepUp, it.At).AtLeast(it.MinAssurance):
		return Refusal{Check: CheckAssurance, Message: fmt.Sprintf("Access denied: %s %s is approved only with %s, and %s decided with %s. Refusing it needs no step-up.",
			StepUpRequired, it.Ref, assuranceNeed(it.MinAssurance), display, AssuranceOf(d, it.StepUp, it.At).Label())}
	}
	return Refusal{}
}

// assuranceNeed says what a minimum asks for, in a refusal.
func assuranceNeed(min Assurance) string {
	switch min {
	case AssuranceOIDC:
		return "a console session opened at the identity provider (OIDC)"
	case AssuranceStepUp:
		return "a fresh sign-in at the identity provider (OIDC step-up)"
	case AssurancePasskey:
		return "a fresh passkey step-up in the console"
	}
	return min.Label()
}

// stepUpRefusal says why a decider is not stepped up for it.
func stepUpRefusal(d Decider, it Decidable, display string) string {
	var why string
	switch {
	case d.AuthAt.IsZero():
		why = fmt.Sprintf("%s carries no fresh sign-in: chat, API keys and sign-in links never do", display)
	case it.At.IsZero():
		why = "the time of the decision is unknown"
	default:
		method := d.AuthMethod
		if method == "" {
			method = "sign-in"
		}
		why = fmt.Sprintf("%s's last %s was at %s, which is not within the last %s", display, method, d.AuthAt.UTC().Format(time.RFC3339), it.StepUp)
	}
	what := "a fresh sign-in at the identity provider"
	if it.MinAssurance == AssurancePasskey {
		what = "a passkey step-up in the console" // the tool's minimum (assurance.go)
	}
	return fmt.Sprintf("Access denied: %s %s is approved only after %s within the last %s, and %s. Refusing it needs no step-up.", StepUpRequired, it.Ref, what, it.StepUp, why)
}

func anOrA(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "n"
	}
	return ""
}

// Short says in a few words why the rule refuses, for a list of items a
// person may only read ("you requested it"); "" when it allows.
func (r Refusal) Short(role Role) string {
	switch r.Check {
	case CheckAllowed:
		return ""
	case CheckIdentity, CheckPerson:
		return "agents and services do not decide"
	case CheckCapability:
		return fmt.Sprintf("needs role member or admin (you are %s)", role)
	case CheckRequester:
		return "you requested it"
	case CheckScope:
		return "outside your scope"
	case CheckStage:
		return "you approved an earlier stage"
	case CheckStepUp:
		return "approving needs a fresh sign-in (step-up)"
	case CheckSuspended:
		return "you are suspended from approving"
	case CheckAssurance:
		return "approving needs a stronger sign-in (step-up)"
	case CheckDelegation:
		return "your delegate approved it for you"
	}
	return r.Message
}

// SeesDetails is the one rule for who may see the details of a sensitive
// item (an action request of a tool marked sensitive, a change to a
// sensitive slot): its arguments, summary and dry run, or its values.
// Anyone who may read the item sees the details of one that is not
// sensitive. Of a sensitive one: its requester (the principal that asked,
// with the item's space in scope), and whoever may decide in the item's
// space under Decide (a person holding approve, the space in
// scope; the tool's own approvers are not consulted, as the space is what
// the details belong to). Everyone else sees that the item exists, its
// status and who decided it, never what it is about. Every surface
// (action_status and the other request tools, callbacks, chat, the
// console, list_grants) asks this rule.
func SeesDetails(d Decider, it Decidable, sensitive bool) bool {
	if !sensitive {
		return true
	}
	if !InScope(d.Role, d.Scopes, it.SpaceUserID) {
		return false
	}
	if (it.RequesterID != "" || it.RequesterName != "") && SamePrincipal(d.ID, d.Name, it.RequesterID, it.RequesterName) {
		return true
	}
	return Decide(d, Decidable{Ref: it.Ref, SpaceUserID: it.SpaceUserID}) == nil
}
