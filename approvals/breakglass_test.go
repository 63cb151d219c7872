package approvals

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
)

// TestReviewsBlockByBreakerAndClearByQuorum: an open review blocks its
// breaker (by name, whole: "ali" is not "alice") only once overdue, and
// no longer once the quorum of distinct reviewers countersigned it; a
// repeat and a dispute do not count.
func TestReviewsBlockByBreakerAndClearByQuorum(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	rv := &Review{ID: "rev_1", RequestID: "req_1", Breaker: Party{ID: "p_a", Name: "Alice", Display: "Alice [p_a]"}, At: at, Due: at.Add(time.Hour), Quorum: 2, Status: ReviewOpen}
	put := func() {
		if err := db.Update(context.Background(), func(tx kv.Tx) error { return PutReview(tx, rv) }); err != nil {
			t.Fatal(err)
		}
	}
	blocked := func(name string, now time.Time) string {
		var id string
		err := db.View(context.Background(), func(tx kv.Tx) error {
			got, err := OverdueReviewOf(tx, name, now)
			if got != nil {
				id = got.ID
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	put()
	for _, tt := range []struct {
		name string
		now  time.Time
		want string
	}{
		{"alice", at.Add(30 * time.Minute), ""}, // open, not yet due
		{"alice", at.Add(time.Hour), "rev_1"},   // due: blocks, whatever the case of the name
		{"ali", at.Add(2 * time.Hour), ""},      // another person
		{"alice2", at.Add(2 * time.Hour), ""},   // another person
		{"", at.Add(2 * time.Hour), ""},         // nobody
	} {
		if got := blocked(tt.name, tt.now); got != tt.want {
			t.Errorf("OverdueReviewOf(%q, +%s) = %q, want %q", tt.name, tt.now.Sub(at), got, tt.want)
		}
	}
	bob, carol := Party{ID: "p_b", Name: "bob", Display: "bob [p_b]"}, Party{ID: "p_c", Name: "carol", Display: "carol [p_c]"}
	for _, step := range []struct {
		who     Party
		dispute bool
		want    Outcome
	}{
		{bob, false, OutcomeCounted},
		{bob, false, OutcomeRepeat},
		{carol, true, OutcomeCounted}, // a dispute is recorded, and counts for nothing
		{Party{ID: "chat:bob", Name: "Bob"}, false, OutcomeRepeat},
		{carol, false, OutcomeDecided},
		{Party{ID: "p_d", Name: "dan"}, false, OutcomeConflict},
	} {
		var got Outcome
		if step.dispute {
			got = rv.Dispute(step.who, "not needed", at, "")
		} else {
			got = rv.Countersign(step.who, "", at, "")
		}
		if got != step.want {
			t.Fatalf("%s (dispute %v): outcome %d, want %d", step.who.Name, step.dispute, got, step.want)
		}
	}
	if rv.Status != ReviewCleared || rv.Tally() != "2 of 2 countersignatures: bob, carol" {
		t.Fatalf("after the quorum: %s, %q, want %s, %q", rv.Status, rv.Tally(), ReviewCleared, "2 of 2 countersignatures: bob, carol")
	}
	put()
	if got := blocked("alice", at.Add(2*time.Hour)); got != "" {
		t.Errorf("a cleared review still blocks: %q, want no block", got)
	}
	var open int
	if err := db.View(context.Background(), func(tx kv.Tx) error {
		return OpenReviews(tx, func(string, time.Time) error { open++; return nil })
	}); err != nil || open != 0 {
		t.Errorf("OpenReviews after clearing: %d (%v), want 0", open, err)
	}
}

// TestAReviewIsStoredInAnAuditedBucket: a review lands in one of
// AuditedBuckets (the state the audit chain's digests cover), so the
// name in that list is the bucket PutReview writes, not a near miss.
// The server's TestAuditStateBucketsExist checks the other buckets after
// a run that fills them; a review needs a break-glass, so it is here.
func TestAReviewIsStoredInAnAuditedBucket(t *testing.T) {
	t.Parallel()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	rv := &Review{ID: "rev_1", RequestID: "req_1", Breaker: Party{ID: "p_a", Name: "alice", Display: "alice [p_a]"}, At: at, Due: at.Add(time.Hour), Quorum: 2, Status: ReviewOpen}
	if err := db.Update(context.Background(), func(tx kv.Tx) error { return PutReview(tx, rv) }); err != nil {
		t.Fatal(err)
	}
	var in []string
	err = db.View(context.Background(), func(tx kv.Tx) error {
		for _, b := range AuditedBuckets() {
			v, err := tx.Get(b, []byte(rv.ID))
			if err != nil {
				return err
			}
			if v != nil {
				in = append(in, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 1 {
		t.Fatalf("review %s found in audited buckets %v, want exactly one of %v", rv.ID, in, AuditedBuckets())
	}
}
