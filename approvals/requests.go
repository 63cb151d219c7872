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
// pending is terminal: once left, pending is never entered again.
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

	ConfirmedBy string    `json:"confirmed_by,omitempty"` // approvers as "name [id]", comma-separated
	DecidedBy   []string  `json:"decided_by,omitempty"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	// GrantID is the standing grant that approved the request at once
	// (grants.go); 0 when a person decided it.
	GrantID uint64 `json:"grant_id,omitempty"`

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

// Decidable is r as the one decision rule (policy.DecisionRefusal) sees it.
func (r *Request) Decidable() policy.Decidable {
	it := policy.Decidable{
		Ref:         r.ID,
		RequesterID: r.Requester.ID, RequesterName: r.Requester.Name, RequesterDisplay: r.Requester.Display,
		SpaceUserID: r.Space.UserID,
		Approvers:   r.Approvers,
		StepUp:      r.StepUp,
	}
	if r.Action != nil {
		it.ApproversOf = r.Action.Tool + " requests"
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
	return r.decide(d, approve, reason, now, false)
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
	if r.Action == nil {
		return OutcomeConflict
	}
	if _, cur := r.Action.Version(); cur == argsSHA256 || r.Status != StatusPending {
		if r.Status != StatusPending && cur != argsSHA256 {
			return OutcomeConflict
		}
		return r.Decide(d, true, reason, now)
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
	return r.decide(d, true, reason, now, true)
}

func (r *Request) decide(d Party, approve bool, reason string, now time.Time, edit bool) Outcome {
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
		if !edit && v.By.Same(d) && v.Approve && approve && r.voteVersion(v) == cur {
			return OutcomeRepeat
		}
	}
	if approve && r.Full(d) != "" {
		return OutcomeFull
	}
	r.Votes = append(r.Votes, Vote{By: d, Approve: approve, Reason: reason, At: now, ArgsSHA256: cur, Edit: edit})
	if !approve {
		r.Status = StatusDenied
		r.DecidedBy = []string{d.Display}
		r.DecidedAt = now
		r.Reason = reason
		r.ConfirmedBy = ""
		return OutcomeDecided
	}
	approvers := r.Approvals()
	if len(approvers) < max(r.Quorum, 1) {
		return OutcomeCounted
	}
	r.Status = StatusApproved
	r.DecidedBy = approvers
	r.DecidedAt = now
	r.ConfirmedBy = strings.Join(approvers, ", ")
	if reason != "" {
		r.Reason = reason
	}
	return OutcomeDecided
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
	return v.Approve && r.voteVersion(v) == r.version()
}

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
	var names []string
	var seen []Party
	for _, v := range r.Votes {
		if r.counts(v) && !slices.ContainsFunc(seen, v.By.Same) {
			seen = append(seen, v.By)
			names = append(names, v.By.Name)
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
