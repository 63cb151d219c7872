// Package memory is the agent memory: facts in memory spaces, declared
// slots, deterministic reconciliation (no model decides), lexical recall and
// the proposals that hold changes to confirm slots for a person.
//
// Everything here reads and writes through a kv.Tx, so one tool call is one
// transaction; the caller (bot/memorytools) adds the audit entry and the chat
// item to the same transaction.
package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/countersign/countersign/policy"
)

// Status is the lifecycle state of a fact. There are exactly four.
type Status string

// The statuses. Only ACTIVE and FLAGGED_CONFLICT are on the hot path.
const (
	StatusActive     Status = "ACTIVE"           // the current value
	StatusFlagged    Status = "FLAGGED_CONFLICT" // held for a person; never presented as current
	StatusSuperseded Status = "SUPERSEDED"       // a former value, retired by a newer one or a retraction
	StatusHistorical Status = "HISTORICAL"       // a past fact, a retraction tombstone or a closed proposal
)

// Live reports whether a fact with this status is on the hot path.
func (s Status) Live() bool { return s == StatusActive || s == StatusFlagged }

// Kind separates facts that hold until replaced (state) from things that
// happened (event), which reconciliation never supersedes.
type Kind string

// The kinds of fact.
const (
	KindState Kind = "state"
	KindEvent Kind = "event"
)

// TimeRef is when a statement is true: now, in the past (archived, never
// current) or in the future (held for a person, not applied).
type TimeRef string

// The time references.
const (
	TimeCurrent TimeRef = "current"
	TimePast    TimeRef = "past"
	TimeFuture  TimeRef = "future"
)

// Action is what reconciliation did with a statement.
type Action string

// The actions.
const (
	ActionAdd       Action = "ADD"       // a new ACTIVE fact: new slot, new list item, or an event
	ActionSupersede Action = "SUPERSEDE" // the old value retired, the new one ACTIVE
	ActionRetract   Action = "RETRACT"   // the value retired, a tombstone written, the slot left empty
	ActionDedup     Action = "DEDUP"     // nothing stored: already known, or already proposed
	ActionCoexist   Action = "COEXIST"   // a new ACTIVE fact beside the same subject in another scope
	ActionFlag      Action = "FLAG"      // stored FLAGGED_CONFLICT; the current value stands
	ActionArchive   Action = "ARCHIVE"   // stored HISTORICAL: a past-tense statement
	ActionSkip      Action = "SKIP"      // nothing stored: nothing matched
)

// Resolution is how a proposal was closed.
type Resolution string

// The resolutions of a proposal.
const (
	ResolvedConfirmed Resolution = "confirmed"
	ResolvedRejected  Resolution = "rejected"
	ResolvedStale     Resolution = "stale"   // the value it would have replaced changed since
	ResolvedExpired   Resolution = "expired" // nobody decided within ProposalMaxAge
)

// AutoThreshold is the confidence below which a change is flagged rather
// than applied.
const AutoThreshold = 0.7

// DefaultConfidence is the confidence of a statement that gives none.
const DefaultConfidence = 0.95

// DefaultScope is the scope of a statement that gives none.
const DefaultScope = "global"

// Space is a memory space (policy.Space, the one space type). Reconciliation,
// recall, history, flags and policies never cross spaces; Space.Check
// keeps its parts from breaking a key.
type Space = policy.Space

// spaceKey is the space's key prefix: user 0x00 agent 0x00 run 0x00. The
// parts hold no NUL (Space.Check), so no space's prefix is a prefix of
// another's.
func spaceKey(s Space) []byte {
	k := make([]byte, 0, len(s.UserID)+len(s.AgentID)+len(s.RunID)+3)
	k = append(k, s.UserID...)
	k = append(k, 0)
	k = append(k, s.AgentID...)
	k = append(k, 0)
	k = append(k, s.RunID...)
	return append(k, 0)
}

// Fact is one stored statement: a value of a subject in a space, with its
// provenance and lifecycle. A proposal is a FLAGGED_CONFLICT fact with
// Pending set.
type Fact struct {
	V          int             `json:"v"`
	ID         uint64          `json:"id"` // sequential per space from 1
	Space      Space           `json:"space"`
	Subject    string          `json:"subject"`
	Value      string          `json:"value"`
	Scope      string          `json:"scope"`
	Kind       Kind            `json:"kind"`
	Status     Status          `json:"status"`
	Supersedes uint64          `json:"supersedes,omitempty"` // the fact this one replaced (or, for a proposal, targets)
	Confidence float64         `json:"confidence"`
	Source     string          `json:"source,omitempty"`
	Said       string          `json:"said,omitempty"` // the sentence that was said
	Category   string          `json:"category,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`  // the caller's metadata object
	SetAt      time.Time       `json:"set_at"`              // when it became what it is (for a confirmed proposal: the confirmation)
	RetiredAt  time.Time       `json:"retired_at,omitzero"` // when it left the hot path
	SetBy      string          `json:"set_by,omitempty"`    // the caller that wrote it, "name [id]"
	Archived   bool            `json:"archived,omitempty"`  // a past-tense statement (ARCHIVE)
	Tombstone  bool            `json:"tombstone,omitempty"` // a "(retracted: …)" row

	// Proposal (held change) fields.
	Pending      Action     `json:"pending,omitempty"` // SUPERSEDE, RETRACT or ADD while held
	Held         string     `json:"held,omitempty"`    // why it is held: "confirm" or a reason sentence
	ProposedAt   time.Time  `json:"proposed_at,omitzero"`
	ProposerID   string     `json:"proposer_id,omitempty"`
	ProposerName string     `json:"proposer_name,omitempty"`
	Resolved     Resolution `json:"resolved,omitempty"`
	DecidedBy    string     `json:"decided_by,omitempty"` // the authenticated decider, "name [id]"
	DecidedAt    time.Time  `json:"decided_at,omitzero"`
	// Assurance is how the decider was authenticated for the decision
	// (policy.AssuranceOf), as an action's votes record it; "" for a
	// proposal closed without a person (stale, expired) or decided before
	// decisions carried one.
	Assurance policy.Assurance `json:"assurance,omitempty"`
	Note      string           `json:"note,omitempty"`   // the decided_by note the decider passed
	Reason    string           `json:"reason,omitempty"` // the decider's reason, or why it was closed
	ItemID    uint64           `json:"item_id,omitempty"`
	Target    string           `json:"target,omitempty"` // the target's value when proposed

	// Edit before approving (#15): the approver confirmed the proposal
	// with another value. Value is then the approved value (the one that
	// became current) and ProposedValue the value as proposed, each with
	// its SHA-256 (ValueSHA256); EditedBy is the approver who edited.
	Edited         bool   `json:"edited,omitempty"`
	EditedBy       string `json:"edited_by,omitempty"`
	ProposedValue  string `json:"proposed_value,omitempty"`
	ProposedSHA256 string `json:"proposed_sha256,omitempty"`
	ApprovedSHA256 string `json:"approved_sha256,omitempty"`
}

// ValueSHA256 is the hex SHA-256 of a value's UTF-8 bytes, as stored: the
// hash a confirmed proposal's proposed and approved values are recorded
// and audited by.
func ValueSHA256(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// factVersion is the stored JSON version of Fact.
const factVersion = 1

// IsProposal reports whether the fact is a held change (open or closed).
func (f *Fact) IsProposal() bool { return f.Pending != "" }

// Open reports whether the fact is a held change awaiting a decision.
func (f *Fact) Open() bool {
	return f.Pending != "" && f.Status == StatusFlagged && f.Resolved == ""
}

// Gated reports whether the proposal was held by a confirm slot.
func (f *Fact) Gated() bool { return f.Held == HeldConfirm }

// HeldConfirm is Fact.Held for a change held by a confirm slot.
const HeldConfirm = "confirm"

// Proposer renders the proposer as "name [id]".
func (f *Fact) Proposer() string {
	if f.ProposerName == "" && f.ProposerID == "" {
		return ""
	}
	return f.ProposerName + " [" + f.ProposerID + "]"
}

// MetadataMap decodes the caller's metadata (nil when there is none).
func (f *Fact) MetadataMap() map[string]any {
	if len(f.Metadata) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(f.Metadata, &m); err != nil {
		return nil
	}
	return m
}

// Provenance is the record of a fact that explains, gates and recall use.
type Provenance struct {
	ID         uint64    `json:"id"`
	Subject    string    `json:"subject"`
	Value      string    `json:"value"`
	Scope      string    `json:"scope"`
	Kind       Kind      `json:"kind"`
	Status     Status    `json:"status"`
	Confidence float64   `json:"confidence"`
	Supersedes uint64    `json:"supersedes,omitempty"`
	Source     string    `json:"source,omitempty"`
	Category   string    `json:"category,omitempty"`
	Said       string    `json:"said,omitempty"`
	SetAt      time.Time `json:"set_at"`
	RetiredAt  time.Time `json:"retired_at,omitzero"`
	Pending    Action    `json:"pending,omitempty"` // set while the fact is an open proposal
}

// Provenance returns the fact's provenance record.
func (f *Fact) Provenance() Provenance {
	return Provenance{
		ID: f.ID, Subject: f.Subject, Value: f.Value, Scope: f.Scope, Kind: f.Kind,
		Status: f.Status, Confidence: f.Confidence, Supersedes: f.Supersedes,
		Source: f.Source, Category: f.Category, Said: f.Said, SetAt: f.SetAt,
		RetiredAt: f.RetiredAt, Pending: f.openPending(),
	}
}

func (f *Fact) openPending() Action {
	if f.Open() {
		return f.Pending
	}
	return ""
}

// NormalizeValue applies a slot's value rule: verbatim keeps the value byte
// for byte; otherwise surrounding and repeated whitespace is collapsed to
// single spaces.
func NormalizeValue(v string, verbatim bool) string {
	if verbatim {
		return v
	}
	return strings.Join(strings.Fields(v), " ")
}

// Canonical is the form two values are compared in: case-folded with
// whitespace collapsed. It never changes what is stored.
func Canonical(v string) string {
	return strings.ToLower(strings.Join(strings.Fields(v), " "))
}
