package approvals

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// This file is break-glass (break_glass: in config.yaml): the mark an
// action request approved by its own requester carries, and the review
// that approval opens, which reviewers (never the breaker) countersign
// within a window. Who may break glass and who may countersign is the one
// decision rule's (policy.BreakGlass, policy.Decide); this file keeps the
// state.

// BreakGlassMark records that a request was approved as break-glass: by
// whom (its requester), why, when, and the review it opened.
type BreakGlassMark struct {
	By     Party     `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Review string    `json:"review"` // rev_…
}

// BreakGlassApprove approves pending action request r at once as d's
// break-glass: d's approval is recorded on the version up for approval
// (for a request in stages, on its open stage), and it decides the
// request alone, whatever its quorum or later stages; the review named
// review stands in for the approvals it skipped. It does not check
// eligibility (policy.Decide with Decidable.BreakGlass does). A request
// that is not a pending action is not changed (OutcomeConflict).
func (r *Request) BreakGlassApprove(d Party, reason string, now time.Time, basis Basis, review string) Outcome {
	if r.Action == nil || r.Status != StatusPending {
		return OutcomeConflict
	}
	stage := 0
	if len(r.Stages) > 0 {
		stage = r.OpenStage() + 1
	}
	r.Votes = append(r.Votes, Vote{By: d, Approve: true, Reason: reason, At: now, ArgsSHA256: r.version(),
		Round: r.Round, Facts: slices.Clone(basis.Facts), Seen: basis.Seen, Stage: stage, Assurance: basis.Assurance})
	r.Status = StatusApproved
	r.DecidedBy = []string{d.Display}
	r.DecidedAt = now
	r.ConfirmedBy = d.Display
	r.Facts = slices.Clone(basis.Facts)
	r.Reason = reason
	r.BreakGlass = &BreakGlassMark{By: d, Reason: reason, At: now, Review: review}
	return OutcomeDecided
}

// ReviewStatus is where a break-glass review is.
type ReviewStatus string

// The statuses of a review.
const (
	ReviewOpen    ReviewStatus = "open"    // awaiting countersignatures
	ReviewCleared ReviewStatus = "cleared" // countersigned by its quorum
)

// Review is the review a break-glass approval opens: Quorum distinct
// reviewers among Approvers (never the breaker: the one rule's requester
// check) countersign it before Due. Until they do, an overdue review
// blocks the breaker's next break-glass. A dispute is recorded (with its
// reason) and keeps it open: only countersignatures clear it.
type Review struct {
	ID        string       `json:"id"` // rev_…
	RequestID string       `json:"request_id"`
	Tool      string       `json:"tool"`
	Space     policy.Space `json:"space"`
	// Breaker is who approved their own request; Reason why.
	Breaker Party     `json:"breaker"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
	Due     time.Time `json:"due"`
	// Approvers and Quorum are break_glass.review's when it was opened.
	Approvers policy.Approvers `json:"approvers,omitzero"`
	Quorum    int              `json:"quorum"`
	// Votes are the countersignatures (Approve) and disputes, in order.
	Votes  []Vote       `json:"votes,omitempty"`
	Status ReviewStatus `json:"status"`
	// ClearedAt is when the quorum was reached; EscalatedAt when the
	// sweeper escalated it as overdue (once).
	ClearedAt   time.Time `json:"cleared_at,omitzero"`
	EscalatedAt time.Time `json:"escalated_at,omitzero"`
	// ItemID is the review's item, on every surface.
	ItemID uint64 `json:"item_id,omitempty"`
}

// Review buckets.
const (
	bucketReviews    = "break_glass_reviews" // review id -> Review JSON
	bucketReviewOpen = "break_glass_open"    // lower-case breaker name 0x00 review id -> due, big-endian unix nanoseconds
)

// NewReviewID returns a random review id, rev_….
func NewReviewID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "rev_" + hex.EncodeToString(b[:]), nil
}

// Need is how many distinct countersignatures clear the review.
func (rv *Review) Need() int { return max(rv.Quorum, 1) }

// Overdue reports whether the review is open past its deadline at now.
func (rv *Review) Overdue(now time.Time) bool {
	return rv.Status == ReviewOpen && !now.Before(rv.Due)
}

// Countersigners are the distinct reviewers who countersigned, as
// "name [id]", in order.
func (rv *Review) Countersigners() []string {
	var seen []Party
	var out []string
	for _, v := range rv.Votes {
		if v.Approve && v.Void == "" && !slices.ContainsFunc(seen, v.By.Same) {
			seen = append(seen, v.By)
			out = append(out, v.By.Display)
		}
	}
	return out
}

// Tally renders the countersignatures: "1 of 2 countersignatures: bob".
func (rv *Review) Tally() string {
	var names []string
	var seen []Party
	for _, v := range rv.Votes {
		if v.Approve && v.Void == "" && !slices.ContainsFunc(seen, v.By.Same) {
			seen = append(seen, v.By)
			names = append(names, v.By.Name)
		}
	}
	s := fmt.Sprintf("%d of %d countersignatures", len(names), rv.Need())
	if len(names) > 0 {
		s += ": " + strings.Join(names, ", ")
	}
	return s
}

// Countersign records d's countersignature. It clears the review when
// the quorum of distinct reviewers is reached (OutcomeDecided), counts it
// otherwise (OutcomeCounted); the same person again is OutcomeRepeat, and
// a cleared review is not changed (OutcomeConflict). It does not check
// eligibility (policy.Decide on Decidable does).
func (rv *Review) Countersign(d Party, reason string, now time.Time, as policy.Assurance) Outcome {
	if rv.Status != ReviewOpen {
		return OutcomeConflict
	}
	if slices.ContainsFunc(rv.Votes, func(v Vote) bool { return v.Approve && v.Void == "" && v.By.Same(d) }) {
		return OutcomeRepeat
	}
	if len(rv.Votes) >= MaxVotes {
		return OutcomeFull
	}
	rv.Votes = append(rv.Votes, Vote{By: d, Approve: true, Reason: reason, At: now, Assurance: as})
	if len(rv.Countersigners()) < rv.Need() {
		return OutcomeCounted
	}
	rv.Status, rv.ClearedAt = ReviewCleared, now
	return OutcomeDecided
}

// VoidVotes makes the countersignatures of the principal named name on
// open review rv stop counting, saying why (they were suspended from
// approving, as Request.VoidVotes). A cleared review is never changed. It
// reports whether rv changed.
func (rv *Review) VoidVotes(name, why string) bool {
	if rv.Status != ReviewOpen || strings.TrimSpace(name) == "" {
		return false
	}
	changed := false
	for i := range rv.Votes {
		if v := &rv.Votes[i]; v.Approve && v.Void == "" && policy.SamePrincipal("", name, "", v.By.Name) {
			v.Void, changed = why, true
		}
	}
	return changed
}

// Dispute records d's dispute of the break-glass, with reason: the
// review stays open (only countersignatures clear it), and the dispute is
// on the record for everyone who reads it.
func (rv *Review) Dispute(d Party, reason string, now time.Time, as policy.Assurance) Outcome {
	if rv.Status != ReviewOpen {
		return OutcomeConflict
	}
	if len(rv.Votes) >= MaxVotes || rv.votesOf(d) >= MaxVotesPerPerson {
		return OutcomeFull
	}
	rv.Votes = append(rv.Votes, Vote{By: d, Approve: false, Reason: reason, At: now, Assurance: as})
	return OutcomeCounted
}

func (rv *Review) votesOf(d Party) int {
	n := 0
	for _, v := range rv.Votes {
		if v.By.Same(d) {
			n++
		}
	}
	return n
}

// Decidable is the review as the one decision rule sees it: its breaker
// is its requester (so never countersigns it), its approvers
// break_glass.review's.
func (rv *Review) Decidable() policy.Decidable {
	return policy.Decidable{
		Ref:         rv.ID,
		RequesterID: rv.Breaker.ID, RequesterName: rv.Breaker.Name, RequesterDisplay: rv.Breaker.Display,
		SpaceUserID: rv.Space.UserID,
		Approvers:   rv.Approvers,
		ApproversOf: "break-glass reviews",
	}
}

func openKey(name, id string) []byte {
	return kv.Join([]byte(strings.ToLower(strings.TrimSpace(name))), []byte(id))
}

// PutReview stores rv and keeps the index of open reviews by breaker.
func PutReview(tx kv.Tx, rv *Review) error {
	b, err := json.Marshal(rv)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketReviews, []byte(rv.ID), b); err != nil {
		return err
	}
	key := openKey(rv.Breaker.Name, rv.ID)
	if rv.Status != ReviewOpen {
		return tx.Delete(bucketReviewOpen, key)
	}
	var due [8]byte
	binary.BigEndian.PutUint64(due[:], uint64(rv.Due.UnixNano()))
	return tx.Put(bucketReviewOpen, key, due[:])
}

// LoadReview reads a review; nil when there is none.
func LoadReview(tx kv.Tx, id string) (*Review, error) {
	b, err := tx.Get(bucketReviews, []byte(id))
	if err != nil || b == nil {
		return nil, err
	}
	var rv Review
	if err := json.Unmarshal(b, &rv); err != nil {
		return nil, fmt.Errorf("review %s: %w", id, err)
	}
	return &rv, nil
}

// OverdueReviewOf is the first open review of breaker name (compared
// case-insensitively, as policy.SamePrincipal compares names) past its
// deadline at now, or nil: what blocks their next break-glass.
func OverdueReviewOf(tx kv.Tx, name string, now time.Time) (*Review, error) {
	if strings.TrimSpace(name) == "" {
		return nil, nil
	}
	var id string
	prefix := append([]byte(strings.ToLower(strings.TrimSpace(name))), 0) // the name whole: "ali" is not "alice"
	err := kv.Prefix(tx, bucketReviewOpen, prefix, func(k, v []byte) error {
		if id == "" && len(v) == 8 && !now.Before(time.Unix(0, int64(binary.BigEndian.Uint64(v)))) {
			id = string(k[len(prefix):])
		}
		return nil
	})
	if err != nil || id == "" {
		return nil, err
	}
	return LoadReview(tx, id)
}

// OpenReviews calls fn with each open review id and its deadline, in
// the order of the index (by breaker). The open reviews are few (each is
// a person's break-glass awaiting countersignatures), so the sweeper and
// /metrics read them all.
func OpenReviews(tx kv.Tx, fn func(id string, due time.Time) error) error {
	return tx.Ascend(bucketReviewOpen, nil, nil, func(k, v []byte) error {
		_, id, ok := strings.Cut(string(k), "\x00")
		if !ok || len(v) != 8 {
			return nil
		}
		return fn(id, time.Unix(0, int64(binary.BigEndian.Uint64(v))))
	})
}

// ClearedReviewsBefore returns up to limit reviews cleared before cutoff,
// for retention: an open review is never among them (it still blocks its
// breaker). Reviews are few, one per break-glass, so it reads them all.
func ClearedReviewsBefore(tx kv.Tx, cutoff time.Time, limit int) ([]*Review, error) {
	var out []*Review
	err := tx.Ascend(bucketReviews, nil, nil, func(k, v []byte) error {
		if len(out) >= limit {
			return kv.ErrStop
		}
		var rv Review
		if err := json.Unmarshal(v, &rv); err != nil {
			return fmt.Errorf("review %s: %w", k, err)
		}
		if rv.Status == ReviewCleared && !rv.ClearedAt.IsZero() && rv.ClearedAt.Before(cutoff) {
			out = append(out, &rv)
		}
		return nil
	})
	return out, err
}

// DeleteReview removes cleared review rv (ClearedReviewsBefore) and its
// index entry. An open review is never deleted.
func DeleteReview(tx kv.Tx, rv *Review) error {
	if rv.Status == ReviewOpen {
		return fmt.Errorf("review %s is open: it is not deleted before its countersignatures", rv.ID)
	}
	if err := tx.Delete(bucketReviewOpen, openKey(rv.Breaker.Name, rv.ID)); err != nil {
		return err
	}
	return tx.Delete(bucketReviews, []byte(rv.ID))
}
