package approvals

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/policy"
)

// TestVoidIneligible: when the directory removes a person from a group,
// their approvals that count for approvers naming that group stop
// counting unless the approvers still include them; approvals at stages
// that do not name the group, votes they cast for someone else, and
// decided requests are left alone; a lost earlier stage sends the
// request back to it.
func TestVoidIneligible(t *testing.T) {
	pharmacists := policy.Approvers{Groups: []string{"Pharmacists"}}
	staged := func() *Request {
		r := rqPending(1)
		r.Stages = []policy.Stage{{Name: "prescriber", Approvers: policy.Approvers{Roles: []string{"member"}}}, {Name: "pharmacist", Approvers: pharmacists}, {Name: "nurse"}}
		return r
	}
	never := func(policy.Approvers) bool { return false }
	always := func(policy.Approvers) bool { return true }
	bobForDave := rqBob.ForDelegator("dave")
	for _, tc := range []struct {
		name      string
		req       func() *Request
		votes     []Party
		who       string
		group     string
		includes  func(policy.Approvers) bool
		decided   bool
		wantVoid  []int // indexes of the votes voided
		wantLater []string
	}{
		{name: "the pharmacist's approval", req: staged, votes: []Party{rqAlice, rqBob}, who: "bob", group: "pharmacists", includes: never, wantVoid: []int{1}},
		{name: "still included (by another group or a role)", req: staged, votes: []Party{rqAlice, rqBob}, who: "bob", group: "pharmacists", includes: always},
		{name: "another group", req: staged, votes: []Party{rqAlice, rqBob}, who: "bob", group: "nurses", includes: never},
		{name: "a stage that names no group", req: staged, votes: []Party{rqAlice, rqBob}, who: "alice", group: "pharmacists", includes: never},
		{name: "an earlier stage lost: the later ones sign off again", req: func() *Request {
			r := staged()
			r.Stages[0].Approvers = pharmacists
			return r
		}, votes: []Party{rqAlice, rqBob}, who: "ALICE", group: "pharmacists", includes: never, wantVoid: []int{0, 1}, wantLater: []string{"bob [prin_b]"}},
		{name: "a vote cast for the person", req: staged, votes: []Party{rqAlice, bobForDave}, who: "dave", group: "pharmacists", includes: never, wantVoid: []int{1}},
		{name: "a vote the person cast for someone else", req: staged, votes: []Party{rqAlice, bobForDave}, who: "bob", group: "pharmacists", includes: never},
		{name: "a request without stages", req: func() *Request {
			r := rqPending(2)
			r.Approvers = pharmacists
			return r
		}, votes: []Party{rqAlice}, who: "alice", group: "pharmacists", includes: never, wantVoid: []int{0}},
		{name: "a decided request stands", req: func() *Request {
			r := rqPending(1)
			r.Approvers = pharmacists
			return r
		}, votes: []Party{rqAlice}, who: "alice", group: "pharmacists", includes: never, decided: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req()
			for i, p := range tc.votes {
				r.Decide(p, true, "", rqT0.Add(time.Duration(i)*time.Minute))
			}
			if got := r.Status == StatusApproved; got != tc.decided {
				t.Fatalf("status %s before the change; want decided %v", r.Status, tc.decided)
			}
			before := r.Tally()
			changed, later := r.VoidIneligible(tc.who, tc.group, tc.includes, "no longer an approver: removed from the group")
			var void []int
			for i, v := range r.Votes {
				if v.Void != "" {
					void = append(void, i)
				}
			}
			if changed != (len(tc.wantVoid) > 0) || !slices.Equal(void, tc.wantVoid) || !slices.Equal(later, tc.wantLater) {
				t.Fatalf("changed %v, voided %v, later %q; want voided %v, later %q (tally before %s, after %s)", changed, void, later, tc.wantVoid, tc.wantLater, before, r.Tally())
			}
			if len(tc.wantVoid) > 0 && !strings.Contains(r.Votes[tc.wantVoid[0]].Void, "removed from the group") {
				t.Errorf("the void vote says %q, want why", r.Votes[tc.wantVoid[0]].Void)
			}
		})
	}
}
