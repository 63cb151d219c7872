package approvals

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/policy"
)

// RequestKind says what a person is asked: to confirm an agent's tool call,
// to give soft-approval consent, or to answer a question.
type RequestKind string

// The kinds of request.
const (
	KindActionRequest   RequestKind = "action"   // confirm_action
	KindConsentRequest  RequestKind = "consent"  // request_approval, record_approval
	KindQuestionRequest RequestKind = "question" // ask_user
)

// RequestStatus is where a request is in its lifecycle. Every status but
// pending is terminal, with one exception: an approved action whose
// receipt was not yet redeemed goes back to pending when the facts its
// approval rests on changed (Reopen). Nothing else ever re-enters pending.
type RequestStatus string

// The statuses.
const (
	StatusPending  RequestStatus = "pending"
	StatusApproved RequestStatus = "approved" // action or consent
	StatusDenied   RequestStatus = "denied"   // action or consent: a person, or automatic policy when headless
	StatusExpired  RequestStatus = "expired"  // the timeout passed unanswered
	StatusAnswered RequestStatus = "answered" // question
	StatusDeclined RequestStatus = "declined" // question the person chose not to answer
	StatusRecorded RequestStatus = "recorded" // consent an agent reports the user gave in its own conversation
)

// Terminal reports whether s is a final status.
func (s RequestStatus) Terminal() bool { return s != StatusPending && s != "" }

// Party is an authenticated principal as recorded on a request.
type Party struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Role    string `json:"role,omitempty"`
	Kind    string `json:"kind,omitempty"`    // person, agent or service
	Display string `json:"display"`           // "name [id]", as the caller is shown
	Surface string `json:"surface,omitempty"` // http, mcp, slack, discord...
	// Scopes are the requester's scopes when it asked (tools[].rules read
	// them as requester.scopes); empty on a vote.
	Scopes []string `json:"scopes,omitempty"`
	// Groups are the approver groups the requester belonged to when it
	// asked (configured, the directory's, its sign-in's, on-call turns;
	// tools[].rules read them as requester.groups), kept so that an edit
	// is judged by the same rule input; empty on a vote.
	Groups []string `json:"groups,omitempty"`
	// For, on a vote, is the delegator the voter decided for, under their
	// delegation (policy.ActingFor; delegation.go); "" for a vote cast in
	// the voter's own right. Display then ends "for <For>".
	For string `json:"for,omitempty"`
}

// Same reports whether p and o are the same principal: same id, or same
// name (a person may hold a key and a chat identity under one name).
func (p Party) Same(o Party) bool {
	return policy.SamePrincipal(p.ID, p.Name, o.ID, o.Name)
}

// Approvers says who may decide a request (policy.Approvers: any
// principal holding one of the roles or named in the principals; both
// empty: anyone holding approve).
type Approvers = policy.Approvers

// Vote is one person's decision on a request.
type Vote struct {
	By      Party     `json:"by"`
	Approve bool      `json:"approve"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// ArgsSHA256 is the hash of the action arguments the vote was cast on
	// (the proposal's, or an edit's); "" on a vote recorded before edits
	// existed, which counts as a vote on the proposal. An approval counts
	// only for the version it was cast on.
	ArgsSHA256 string `json:"args_sha256,omitempty"`
	// Edit marks the approval that made an edit: ArgsSHA256 is the edited
	// version it introduced.
	Edit bool `json:"edit,omitempty"`
	// Round is the request's round the vote was cast in (Request.Round):
	// a vote counts only in its own round, so a request sent back for a
	// new decision (Reopen) starts its count again.
	Round int `json:"round,omitempty"`
	// Facts are the facts the vote was cast on: the request's context
	// subjects as they stood in the vote's transaction. nil when the tool
	// declares no context.
	Facts []Fact `json:"facts,omitempty"`
	// Seen is what the voter was shown (the rendered card or page); nil
	// when the surface showed nothing (an API call, a typed command).
	Seen *Seen `json:"seen,omitempty"`
	// Stage is the stage (1-based) of a request signed off in stages that
	// the approval counts for; 0 on a request without stages, and on an
	// edit of a staged request (an edit restarts at the first stage and
	// counts for none).
	Stage int `json:"stage,omitempty"`
	// Void, when set, says why the vote no longer counts although it was
	// cast on the version up now: its voter was suspended from approving
	// while the request was pending (VoidVotes). It stays void.
	Void string `json:"void,omitempty"`
	// Assurance is how the voter was authenticated for this vote
	// (policy.AssuranceOf: chat, link, oidc, oidc_step_up, passkey,
	// api_key); "" on a vote recorded before votes carried one.
	Assurance policy.Assurance `json:"assurance,omitempty"`
}

// Fact is one fact an approval rests on: a context subject of the tool
// (tools[].context) in the request's space, as it stood when the approval
// was given. Version identifies the subject's live facts, so any change
// (a new value superseding it, a retraction, a proposal flagging it)
// gives another Version; Value is what was shown.
type Fact struct {
	Subject string `json:"subject"`
	// Value is the subject's value as shown: its active values, a
	// pending proposal noted, or "none" when nothing is recorded.
	Value string `json:"value"`
	// Version is the ids and statuses of the subject's live facts
	// ("" when there are none).
	Version string `json:"version"`
}

// FactChange is one context subject whose facts changed since an
// approval: "allergy: none → penicillin".
type FactChange struct {
	Subject  string
	Was, Now string
}

// String renders the change as "subject: was → now".
func (c FactChange) String() string {
	now := c.Now
	if now == c.Was {
		now += " (changed)"
	}
	return c.Subject + ": " + c.Was + " → " + now
}

// FactChanges lists the subjects of was whose Version differs in now (a
// subject missing from now counts as changed to "none"), in was's order.
func FactChanges(was, now []Fact) []FactChange {
	var out []FactChange
	for _, w := range was {
		cur := Fact{Subject: w.Subject, Value: "none"}
		for _, n := range now {
			if n.Subject == w.Subject {
				cur = n
				break
			}
		}
		if cur.Version != w.Version {
			out = append(out, FactChange{Subject: w.Subject, Was: w.Value, Now: cur.Value})
		}
	}
	return out
}

// JoinChanges renders changes as one line: "allergy: none → penicillin;
// active_medication: …".
func JoinChanges(cs []FactChange) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// Seen is what an approver was shown when they voted: the SHA-256 of the
// text of the card or page as rendered (hex), the surface that showed it,
// and whether anything of the item was cut to fit.
type Seen struct {
	SHA256    string `json:"sha256"`
	Surface   string `json:"surface"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Basis is what a vote is cast on besides the arguments: the facts as
// they stand, and what the voter was shown.
type Basis struct {
	Facts []Fact
	Seen  *Seen
	// Assurance is how the voter is authenticated for this vote.
	Assurance policy.Assurance
}

// Action is what an action request asks to confirm: one tool call, bound to
// its exact arguments by ArgsSHA256. Arguments and ArgsSHA256 are the
// proposal, as the agent sent it, and never change. An approver may edit
// the arguments before approving: the edited version is then
// ApprovedArguments (ApprovedArgsSHA256), the one that approvals count for
// and that runs.
type Action struct {
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"` // canonical JSON, as proposed
	ArgsSHA256 string          `json:"args_sha256"`
	// ApprovedArguments and ApprovedArgsSHA256 are the edited version
	// (canonical JSON, and its hash): set while Edited, empty otherwise
	// (the proposal is then the version up for approval). Version returns
	// whichever is current.
	ApprovedArguments  json.RawMessage `json:"approved_arguments,omitempty"`
	ApprovedArgsSHA256 string          `json:"approved_args_sha256,omitempty"`
	// Edited reports that the version up for approval (and, once approved,
	// the one approved) differs from the proposal; EditedBy is who made
	// the latest edit, "name [id]".
	Edited           bool     `json:"edited,omitempty"`
	EditedBy         string   `json:"edited_by,omitempty"`
	Summary          string   `json:"summary,omitempty"`
	DryRun           string   `json:"dry_run,omitempty"` // the plan as shown
	RequestedEffects []string `json:"requested_effects,omitempty"`
	StatedCategory   string   `json:"stated_category,omitempty"` // what the agent said; recorded, not trusted
	Category         string   `json:"category"`                  // from config: the one that counts
	Mechanics        string   `json:"mechanics"`
	Command          string   `json:"command,omitempty"` // the allowlist entry an exec call matched
	Headless         bool     `json:"headless,omitempty"`
	Sensitive        bool     `json:"sensitive,omitempty"`
	ActionID         string   `json:"action_id,omitempty"`   // the agent's idempotency key
	Fingerprint      string   `json:"fingerprint,omitempty"` // sha256 of the whole request body
}

// Version is the arguments up for approval (once approved: the approved
// ones) and their hash: the latest edit, else the proposal.
func (a *Action) Version() (json.RawMessage, string) {
	if a.Edited {
		return a.ApprovedArguments, a.ApprovedArgsSHA256
	}
	return a.Arguments, a.ArgsSHA256
}

// Consent is a soft-approval consent: asked for in chat, or reported by the
// agent as given in its own conversation.
type Consent struct {
	Action    string `json:"action"`
	Question  string `json:"question,omitempty"`
	Detail    string `json:"detail,omitempty"`
	Turn      string `json:"turn,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// Question is an ask_user question and, once answered, its answer.
type Question struct {
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	Multi    bool     `json:"multi,omitempty"`
	Context  string   `json:"context,omitempty"`
	Answers  []string `json:"answers,omitempty"`
	Text     string   `json:"text,omitempty"` // a free-text answer, or the reason for declining
}

// Request is a stored request of any kind.
type Request struct {
	ID        string        `json:"id"`
	Kind      RequestKind   `json:"kind"`
	ItemID    uint64        `json:"item_id,omitempty"` // the chat item; 0 when decided at once
	Space     policy.Space  `json:"space"`
	Requester Party         `json:"requester"`
	Channel   string        `json:"channel,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	ExpiresAt time.Time     `json:"expires_at,omitzero"`
	Status    RequestStatus `json:"status"`

	Approvers Approvers `json:"approvers,omitzero"`
	Quorum    int       `json:"quorum,omitempty"`
	Votes     []Vote    `json:"votes,omitempty"`
	// StepUp, when positive, is how fresh each approver's last sign-in at
	// the identity provider must be (set at creation from step_up: in the
	// config; see policy.Decidable.StepUp).
	StepUp time.Duration `json:"step_up,omitempty"`
	// Stages, when set, are the ordered sign-off the request needs
	// (stages.go): they stand in for Approvers, Quorum and StepUp.
	Stages []policy.Stage `json:"stages,omitempty"`
	// Rule is the tools[].rules entry that set the request's policy, and
	// why; nil when no rule matched.
	Rule *RuleMatch `json:"rule,omitempty"`
	// MinAssurance, when set, is the least assurance an approval needs
	// (tools[].step_up.method; see policy.Decidable.MinAssurance).
	MinAssurance policy.Assurance `json:"min_assurance,omitempty"`

	// Context are the subjects the approval rests on (the tool's
	// tools[].context when the request was made), in the request's space.
	Context []string `json:"context,omitempty"`
	// Facts are the context facts of the deciding approval (a vote's, or
	// a standing grant's at the time it approved); nil until approved.
	Facts []Fact `json:"facts,omitempty"`
	// Round counts the times the request went back to pending (Reopen);
	// only votes of the current round count, and a receipt names its
	// round, so one of an earlier round never redeems.
	Round int `json:"round,omitempty"`
	// Reopened is why the request last went back to pending (the facts
	// that changed), and ReopenedAt when; empty when it never did.
	Reopened   string    `json:"reopened,omitempty"`
	ReopenedAt time.Time `json:"reopened_at,omitzero"`

	ConfirmedBy string    `json:"confirmed_by,omitempty"` // approvers as "name [id]", comma-separated
	DecidedBy   []string  `json:"decided_by,omitempty"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	// GrantID is the standing grant that approved the request at once
	// (grants.go); 0 when a person decided it.
	GrantID uint64 `json:"grant_id,omitempty"`
	// BreakGlass, when set, marks a request approved by its own
	// requester as break-glass (breakglass.go); nil otherwise.
	BreakGlass *BreakGlassMark `json:"break_glass,omitempty"`

	CallbackURL string `json:"callback_url,omitempty"`

	// ExecutedAt and ExecutedBy record the redemption of an approved
	// action's receipt (redeem_receipt): once.
	ExecutedAt time.Time `json:"executed_at,omitzero"`
	ExecutedBy string    `json:"executed_by,omitempty"`

	// Lifecycle bookkeeping of the sweeper: each happens once.
	RemindedAt  time.Time `json:"reminded_at,omitzero"`
	EscalatedAt time.Time `json:"escalated_at,omitzero"`
	// DueAt is the time under which the request sits in the deadline index
	// (zero: not indexed).
	DueAt time.Time `json:"due_at,omitzero"`

	Action   *Action   `json:"action,omitempty"`
	Consent  *Consent  `json:"consent,omitempty"`
	Question *Question `json:"question,omitempty"`
}

// NewRequestID returns a random id with the kind's prefix: req_ for an
// action, con_ for a consent, ask_ for a question.
func NewRequestID(k RequestKind) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return requestPrefix(k) + hex.EncodeToString(b[:]), nil
}

func requestPrefix(k RequestKind) string {
	switch k {
	case KindConsentRequest:
		return "con_"
	case KindQuestionRequest:
		return "ask_"
	}
	return "req_"
}

// Decidable is r as the one decision rule (policy.Decide) sees it.
func (r *Request) Decidable() policy.Decidable {
	it := policy.Decidable{
		Ref:         r.ID,
		RequesterID: r.Requester.ID, RequesterName: r.Requester.Name, RequesterDisplay: r.Requester.Display,
		SpaceUserID:  r.Space.UserID,
		Approvers:    r.Approvers,
		StepUp:       r.StepUp,
		MinAssurance: r.MinAssurance,
	}
	it.Counted, it.Delegable = r.counted(), true // delegation.go
	if r.Action != nil {
		it.ApproversOf = r.Action.Tool + " requests"
	}
	if len(r.Stages) > 0 {
		r.stageDecidable(&it)
	}
	return it
}

// Expired reports whether r is still pending but its expiry has passed at
// now: nobody may decide it any more, and it must be closed as expired.
func (r *Request) Expired(now time.Time) bool {
	return r.Status == StatusPending && !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// Outcome is what a decision did to a request.
type Outcome int

// The outcomes of Decide.
const (
	// OutcomeDecided: this decision gave the request its final outcome.
	OutcomeDecided Outcome = iota + 1
	// OutcomeCounted: an approval counted towards a quorum not yet reached.
	OutcomeCounted
	// OutcomeRepeat: the same person's same decision again; nothing changed.
	OutcomeRepeat
	// OutcomeConflict: the request was already decided; nothing changed.
	OutcomeConflict
	// OutcomeFull: the request holds as many votes as it keeps (MaxVotes,
	// or MaxVotesPerPerson of this person's); an approval or an edit is
	// refused, nothing changed. A denial is never refused.
	OutcomeFull
)

// Bounds of a request's vote list: every approval and every edit is kept
// for the record, so that repeated edits cannot grow a request without
// bound.
const (
	// MaxVotes is the most votes a request keeps.
	MaxVotes = 100
	// MaxVotesPerPerson is the most votes one person casts on a request
	// (each edit is one).
	MaxVotesPerPerson = 10
)

// Full says why d's approval or edit of pending r would not be recorded
// (the vote list holds MaxVotes, or MaxVotesPerPerson of d's), or "".
func (r *Request) Full(d Party) string {
	if len(r.Votes) >= MaxVotes {
		return fmt.Sprintf("%s already holds %d votes, the most a request keeps", r.ID, MaxVotes)
	}
	n := 0
	for _, v := range r.Votes {
		if v.By.Same(d) {
			n++
		}
	}
	if n >= MaxVotesPerPerson {
		return fmt.Sprintf("%s already holds %d votes of %s's (each edit is one), the most one person casts on a request", r.ID, n, d.Display)
	}
	return ""
}

// Revised reports whether r's arguments were edited since it was created
// (even when an edit later put the proposal back): an approval of r must
// then name the version it approves.
func (r *Request) Revised() bool {
	return r.Action != nil && slices.ContainsFunc(r.Votes, func(v Vote) bool { return v.Edit })
}

// Decide applies d's decision to a pending request: one deny denies; an
// approval counts once per person, and the quorum-th distinct approver
// approves. An action's approval counts for the version of the arguments
// it was cast on (Action.Version): votes on an earlier version stay in
// Votes for the record but no longer count. A request that is no longer
// pending is never changed: the same person repeating their recorded
// decision gets OutcomeRepeat, anyone else OutcomeConflict. Decide does
// not check eligibility (see Refusal).
func (r *Request) Decide(d Party, approve bool, reason string, now time.Time) Outcome {
	return r.decide(d, approve, reason, now, false, Basis{})
}

// DecideOn is Decide with what the vote is cast on recorded on it: the
// facts as they stand and what the voter was shown. An approval that
// decides the request also makes basis.Facts the request's Facts.
func (r *Request) DecideOn(d Party, approve bool, reason string, now time.Time, basis Basis) Outcome {
	return r.decide(d, approve, reason, now, false, basis)
}

// Edit is d's approval of an action request with changed arguments: args
// (canonical JSON, already validated like a new request) hashing to
// argsSHA256. When they differ from the version now up for approval, they
// become it (Action.ApprovedArguments; back to the proposal when they equal
// it), the count restarts on them (approvals of the earlier version no
// longer count: each approver approves the same bytes), and d's approval is
// the first vote on them. Arguments equal to the current version are no
// edit: a plain approval. Like Decide, it changes nothing once the request
// is decided (the same person repeating an approval of the approved bytes
// gets OutcomeRepeat) and does not check eligibility.
func (r *Request) Edit(d Party, args json.RawMessage, argsSHA256, reason string, now time.Time) Outcome {
	return r.EditOn(d, args, argsSHA256, reason, now, Basis{})
}

// EditOn is Edit with what the vote is cast on recorded on it (DecideOn).
func (r *Request) EditOn(d Party, args json.RawMessage, argsSHA256, reason string, now time.Time, basis Basis) Outcome {
	if r.Action == nil {
		return OutcomeConflict
	}
	if _, cur := r.Action.Version(); cur == argsSHA256 || r.Status != StatusPending {
		if r.Status != StatusPending && cur != argsSHA256 {
			return OutcomeConflict
		}
		return r.decide(d, true, reason, now, false, basis)
	}
	if r.Full(d) != "" {
		return OutcomeFull // nothing is changed
	}
	a := r.Action
	if argsSHA256 == a.ArgsSHA256 {
		a.ApprovedArguments, a.ApprovedArgsSHA256, a.Edited = nil, "", false
	} else {
		a.ApprovedArguments, a.ApprovedArgsSHA256, a.Edited = slices.Clone(args), argsSHA256, true
	}
	a.EditedBy = d.Display
	return r.decide(d, true, reason, now, true, basis)
}

func (r *Request) decide(d Party, approve bool, reason string, now time.Time, edit bool, basis Basis) Outcome {
	cur := r.version()
	if r.Status != StatusPending {
		for _, v := range r.Votes {
			if v.By.Same(d) && v.Approve == approve && r.decisive(v) {
				return OutcomeRepeat
			}
		}
		return OutcomeConflict
	}
	for _, v := range r.Votes {
		// An edit is never a repeat: it changed the version, so it is
		// recorded (the editor's earlier vote on these bytes, if any,
		// still counts once).
		if !edit && v.By.Same(d) && v.Approve && approve && v.Void == "" && r.voteVersion(v) == cur && v.Round == r.Round && (len(r.Stages) == 0 || v.Stage > 0) {
			return OutcomeRepeat
		}
	}
	if approve && r.Full(d) != "" {
		return OutcomeFull
	}
	stage := 0
	if len(r.Stages) > 0 && approve && !edit {
		stage = r.OpenStage() + 1
	}
	r.Votes = append(r.Votes, Vote{By: d, Approve: approve, Reason: reason, At: now, ArgsSHA256: cur, Edit: edit,
		Round: r.Round, Facts: slices.Clone(basis.Facts), Seen: basis.Seen, Stage: stage, Assurance: basis.Assurance})
	if !approve {
		r.Status = StatusDenied
		r.DecidedBy = []string{d.Display}
		r.DecidedAt = now
		r.Reason = reason
		r.ConfirmedBy = ""
		return OutcomeDecided
	}
	approvers := r.Approvals()
	if len(r.Stages) > 0 {
		if r.OpenStage() < len(r.Stages) {
			return OutcomeCounted
		}
	} else if len(approvers) < max(r.Quorum, 1) {
		return OutcomeCounted
	}
	r.Status = StatusApproved
	r.DecidedBy = approvers
	r.DecidedAt = now
	r.ConfirmedBy = strings.Join(approvers, ", ")
	r.Facts = slices.Clone(basis.Facts)
	if reason != "" {
		r.Reason = reason
	}
	return OutcomeDecided
}

// Reopen sends r back for a new decision because the facts its approval
// rests on changed (why says how: "allergy: none → penicillin"). It
// applies to an action request that is pending (the count starts again:
// approvals already given no longer count) or approved with its receipt
// not yet redeemed (it is pending again, until expires; its receipt no
// longer redeems). Either way Round moves on, so votes and receipts of the
// earlier round never count again; the votes stay in Votes for the
// record. It reports whether r changed: a request in any other state
// (denied, expired, executed, not an action) never does.
func (r *Request) Reopen(why string, now, expires time.Time) bool {
	if r.Action == nil {
		return false
	}
	switch {
	case r.Status == StatusPending:
	case r.Status == StatusApproved && r.ExecutedAt.IsZero():
		r.Status = StatusPending
		r.DecidedBy, r.DecidedAt, r.ConfirmedBy = nil, time.Time{}, ""
		r.Facts, r.GrantID, r.Reason = nil, 0, ""
		r.ExpiresAt = expires
	default:
		return false
	}
	r.Round++
	r.Reopened, r.ReopenedAt = why, now
	return true
}

// Bases are the facts each counting approval of r was cast on, and the
// deciding approval's (Facts), for comparing with the facts as they
// stand: the approval rests on every one of them.
func (r *Request) Bases() [][]Fact {
	var out [][]Fact
	for _, v := range r.Votes {
		if r.counts(v) && v.Facts != nil {
			out = append(out, v.Facts)
		}
	}
	if r.Facts != nil {
		out = append(out, r.Facts)
	}
	return out
}

// Changes lists what changed in now since the facts any counting approval
// of r rests on (Bases), once per subject, the earliest basis first.
func (r *Request) Changes(now []Fact) []FactChange {
	var out []FactChange
	seen := map[string]bool{}
	for _, b := range r.Bases() {
		for _, c := range FactChanges(b, now) {
			if !seen[c.Subject] {
				seen[c.Subject] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// version is the hash of the action arguments up for approval ("" for a
// request that is not an action).
func (r *Request) version() string {
	if r.Action == nil {
		return ""
	}
	_, h := r.Action.Version()
	return h
}

// voteVersion is the version v was cast on: its hash, or for a vote
// recorded before votes carried one, the proposal's.
func (r *Request) voteVersion(v Vote) string {
	if v.ArgsSHA256 == "" && r.Action != nil {
		return r.Action.ArgsSHA256
	}
	return v.ArgsSHA256
}

// counts reports whether v is an approval that counts: one cast on the
// version now up for approval.
func (r *Request) counts(v Vote) bool {
	return v.Approve && v.Void == "" && r.voteVersion(v) == r.version() && v.Round == r.Round && (len(r.Stages) == 0 || v.Stage > 0)
}

// VoidVotes makes the approvals of the principal named name (compared as
// policy.SamePrincipal does) on pending request r stop counting, saying
// why: their voter was suspended from approving. A decided request is
// never changed (its decision stands, and is in the audit chain). It
// reports whether r changed; VoidApprovals says what else changed.
func (r *Request) VoidVotes(name, why string) bool {
	changed, _ := r.VoidApprovals(name, why)
	return changed
}

// VoidApprovals is VoidVotes, and, for a request signed off in stages,
// what a voided approval does to the stages after it: when it leaves an
// earlier stage without enough approvals, the request goes back to that
// stage, and the approvals of every later stage stop counting too (they
// were given after it, on the strength of a sign-off that no longer
// stands), so each later stage signs off again once the stage before it
// is complete again. later lists the people whose later-stage approvals
// were voided so, as "name [id]"; their votes stay in Votes for the
// record, and, no longer counting, do not hold them to that stage.
func (r *Request) VoidApprovals(name, why string) (changed bool, later []string) {
	if r.Status != StatusPending || strings.TrimSpace(name) == "" {
		return false, nil
	}
	for i := range r.Votes {
		v := &r.Votes[i]
		if v.Approve && v.Void == "" && (policy.SamePrincipal("", name, "", v.By.Name) || v.By.castFor(name)) {
			v.Void = why
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	return true, r.restage(name, why)
}

// restage voids, once name's approvals were voided (why), the approvals
// of the stages after the first stage now short of approvals: those
// stages sign off again. It returns the voters whose approvals it voided.
func (r *Request) restage(name, why string) (later []string) {
	if len(r.Stages) == 0 {
		return nil
	}
	open := r.OpenStage() // the first stage short of approvals now
	var after []int
	for i, v := range r.Votes {
		if v.Stage > open+1 && r.counts(v) {
			after = append(after, i)
		}
	}
	for _, i := range after {
		v := &r.Votes[i]
		v.Void = fmt.Sprintf("stage %d of %d (%s) lost %s's approval (%s), so the stages after it sign off again", open+1, len(r.Stages), r.Stages[open].Name, name, why)
		if !slices.Contains(later, v.By.Display) {
			later = append(later, v.By.Display)
		}
	}
	return later
}

// DecisionAssurance is how the decision of r was authenticated: for an
// approved request the weakest assurance of the approvals that decided it
// (policy.Weakest), for a denied one the denial's; "" while pending, for a
// request decided by a grant or automatic policy, or when a deciding vote
// was recorded before votes carried one.
func (r *Request) DecisionAssurance() policy.Assurance {
	var as []policy.Assurance
	for _, v := range r.Votes {
		if r.decisive(v) {
			as = append(as, v.Assurance)
		}
	}
	return policy.Weakest(as)
}

// Voters are the distinct names of the people whose approvals count on r
// now, in the order they approved.
func (r *Request) Voters() []string {
	var out []string
	for _, v := range r.Votes {
		if r.counts(v) && !slices.ContainsFunc(out, func(n string) bool { return policy.SamePrincipal("", n, "", v.By.Name) }) {
			out = append(out, v.By.Name)
		}
	}
	return out
}

// Counts reports whether v is an approval that counts now: cast on the
// version of the arguments up for approval, in the current round.
func (r *Request) Counts(v Vote) bool { return r.counts(v) }

// decisive reports whether v is part of r's recorded decision: an approval
// (of the approved version) of an approved request, or the denial of a
// denied one.
func (r *Request) decisive(v Vote) bool {
	switch r.Status {
	case StatusApproved:
		return r.counts(v)
	case StatusDenied:
		return !v.Approve && slices.Contains(r.DecidedBy, v.By.Display)
	}
	return false
}

// Approvals lists the distinct approvers of r so far, as "name [id]", in
// the order they approved: for an action, the approvers of the version
// now up for approval.
func (r *Request) Approvals() []string {
	var seen []Party
	var out []string
	for _, v := range r.Votes {
		if !r.counts(v) || slices.ContainsFunc(seen, v.By.Same) {
			continue
		}
		seen = append(seen, v.By)
		out = append(out, v.By.Display)
	}
	return out
}

// Tally renders the quorum count, as "1 of 2 approvals: dr_smith": for an
// action, of the version now up for approval.
func (r *Request) Tally() string {
	if len(r.Stages) > 0 {
		return r.stageTally()
	}
	var names []string
	var seen []Party
	for _, v := range r.Votes {
		if r.counts(v) && !slices.ContainsFunc(seen, v.By.Same) {
			seen = append(seen, v.By)
			names = append(names, v.By.Label())
		}
	}
	s := fmt.Sprintf("%d of %d approvals", len(names), max(r.Quorum, 1))
	if len(names) > 0 {
		s += ": " + strings.Join(names, ", ")
	}
	return s
}

// Close ends a pending request without a person's decision (automatic
// policy: headless, or timed out) with status and reason. It reports
// whether r changed; a decided request is never changed.
func (r *Request) Close(status RequestStatus, reason string, now time.Time) bool {
	if r.Status != StatusPending || !status.Terminal() {
		return false
	}
	r.Status = status
	r.Reason = reason
	r.DecidedAt = now
	r.ConfirmedBy = ""
	return true
}

// Answer records d's answer to a pending question: the chosen options and
// an optional free text, or, when decline is set, that d declined with text
// as the reason. It reports OutcomeDecided, or OutcomeRepeat/OutcomeConflict
// for a question already answered (the same answer by the same person
// repeats).
func (r *Request) Answer(d Party, answers []string, text string, decline bool, now time.Time) Outcome {
	if r.Question == nil {
		return OutcomeConflict
	}
	if r.Status != StatusPending {
		same := len(r.Votes) > 0 && r.Votes[0].By.Same(d) &&
			(r.Status == StatusDeclined) == decline && slices.Equal(r.Question.Answers, answers)
		if same {
			return OutcomeRepeat
		}
		return OutcomeConflict
	}
	r.Votes = []Vote{{By: d, Approve: !decline, Reason: text, At: now}}
	r.DecidedBy = []string{d.Display}
	r.DecidedAt = now
	if decline {
		r.Status = StatusDeclined
		r.Reason = text
		return OutcomeDecided
	}
	r.Status = StatusAnswered
	r.Question.Answers = append([]string(nil), answers...)
	r.Question.Text = text
	return OutcomeDecided
}

// NextDue is when the sweeper must next look at r given the reminder and
// escalation delays (0: none), or the zero time when nothing is due.
func (r *Request) NextDue(remindAfter, escalateAfter time.Duration) time.Time {
	if r.Status != StatusPending {
		return time.Time{}
	}
	due := r.ExpiresAt
	consider := func(t time.Time) {
		if due.IsZero() || t.Before(due) {
			due = t
		}
	}
	if remindAfter > 0 && r.RemindedAt.IsZero() {
		consider(r.CreatedAt.Add(remindAfter))
	}
	if escalateAfter > 0 && r.EscalatedAt.IsZero() {
		consider(r.CreatedAt.Add(escalateAfter))
	}
	return due
}

// SweepStep is what the sweeper does to a request at now.
type SweepStep struct {
	Expire   bool
	Remind   bool
	Escalate bool
}

// Due says what the sweeper must do to r at now: expire it once ExpiresAt
// has passed; otherwise remind once after remindAfter and escalate once
// after escalateAfter. A request that expires gets neither.
func (r *Request) Due(now time.Time, remindAfter, escalateAfter time.Duration) SweepStep {
	if r.Status != StatusPending {
		return SweepStep{}
	}
	if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		return SweepStep{Expire: true}
	}
	return SweepStep{
		Remind:   remindAfter > 0 && r.RemindedAt.IsZero() && !now.Before(r.CreatedAt.Add(remindAfter)),
		Escalate: escalateAfter > 0 && r.EscalatedAt.IsZero() && !now.Before(r.CreatedAt.Add(escalateAfter)),
	}
}
