package approvals

import (
	"fmt"
	"testing"
	"time"
)

// FuzzDecisionStateMachine applies a random sequence of operations (approve
// or deny by one of four people, expire, record, answer) to a request with
// a random quorum. Invariants: a terminal state never changes, nor who
// decided it or when; once terminal, every operation reports a repeat or a
// conflict, never a new decision; a quorum approval needs that many
// distinct approvers.
func FuzzDecisionStateMachine(f *testing.F) {
	f.Add(uint8(1), []byte{0, 1, 2, 3})
	f.Add(uint8(2), []byte{0, 0, 4, 1, 9})
	f.Add(uint8(3), []byte{8, 8, 16, 24, 5, 6})
	f.Fuzz(func(t *testing.T, quorum uint8, ops []byte) {
		t0 := time.Unix(1_800_000_000, 0)
		r := &Request{ID: "req_1", Kind: KindActionRequest, Status: StatusPending, Quorum: int(quorum%4) + 1, CreatedAt: t0}
		people := []Party{
			{ID: "p1", Name: "ann", Display: "ann [p1]"},
			{ID: "p2", Name: "bob", Display: "bob [p2]"},
			{ID: "p3", Name: "cy", Display: "cy [p3]"},
			{ID: "p4", Name: "di", Display: "di [p4]"},
		}
		var final *Request
		for i, op := range ops {
			now := t0.Add(time.Duration(i) * time.Second)
			who := people[int(op>>3)%len(people)]
			before := fmt.Sprintf("%s|%v|%v|%s", r.Status, r.DecidedBy, r.DecidedAt, r.Reason)
			var out Outcome
			changed := false
			switch op % 8 {
			case 0, 1, 2:
				out = r.Decide(who, true, "ok", now)
			case 3, 4:
				out = r.Decide(who, false, "no", now)
			case 5:
				changed = r.Close(StatusExpired, "timed out", now)
			case 6:
				changed = r.Close(StatusRecorded, "recorded", now)
			case 7:
				out = r.Decide(who, true, "", now)
			}
			after := fmt.Sprintf("%s|%v|%v|%s", r.Status, r.DecidedBy, r.DecidedAt, r.Reason)
			if final != nil {
				if after != before || changed || out == OutcomeDecided || out == OutcomeCounted {
					t.Fatalf("op %d (%d) changed a terminal request: %s -> %s (outcome %v, closed %v)", i, op, before, after, out, changed)
				}
				continue
			}
			if r.Status.Terminal() {
				c := *r
				final = &c
				if r.Status == StatusApproved && len(r.Approvals()) < r.Quorum {
					t.Fatalf("approved with %d approvers, want at least the quorum %d", len(r.Approvals()), r.Quorum)
				}
			}
		}
	})
}
