package chattest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEligibleClickApprovesAndUpdatesTheCard: the card is posted with
// Approve and Reject; a mapped member's click approves it as that member
// (surface id included), answers nobody privately, and the card is
// updated in place without buttons, saying who approved.
func TestEligibleClickApprovesAndUpdatesTheCard(t *testing.T) {
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			posted := s.card(approver, id)
			if !posted.has("approve") || !posted.has("reject") {
				t.Errorf("posted card's buttons = %v, want approve and reject", posted.buttons)
			}
			if !has(posted.text, "restart_service", "payments") {
				t.Errorf("posted card does not name the call (restart_service on payments):\n%s", posted.text)
			}
			if posted.danger != "" {
				t.Errorf("a mutating call's Approve is styled dangerous: %q", posted.danger)
			}

			a := s.click(approver, id, "approve")
			if a.private != "" {
				t.Errorf("the approver was told privately %q, want nothing", a.private)
			}
			if a.card != nil && (len(a.card.buttons) != 0 || !has(a.card.text, "Approved", "dr_smith")) {
				t.Errorf("the card answered in place: buttons %v text\n%s\nwant no buttons, Approved by dr_smith", a.card.buttons, a.card.text)
			}
			it := w.item(id)
			if want := []string{s.who(approver)}; it.Status != "approved" || !slices.Equal(it.DecidedBy, want) {
				t.Fatalf("item: status %q decided_by %v, want approved by %v", it.Status, it.DecidedBy, want)
			}
			if n := len(w.entries("action_approved")); n != 1 {
				t.Errorf("%d action_approved audit entries, want 1", n)
			}
			s.drain()
			if n := s.edits(id); n != 1 {
				t.Errorf("%d updates of the card's message, want 1", n)
			}
			c := s.card(approver, id)
			if len(c.buttons) != 0 || !has(c.text, "Approved", "dr_smith") {
				t.Errorf("updated card: buttons %v text\n%s\nwant no buttons, Approved by dr_smith", c.buttons, c.text)
			}
		})
	}
}

var _ = strings.Contains

// TestIneligibleClicksAreRefusedPrivatelyAndAudited: an unmapped person,
// a viewer (no approve capability) and the requester themself are each
// refused in a private answer that says why; the refusal is audited under
// the clicker's surface identity; the item stays pending and its card is
// not touched.
func TestIneligibleClicksAreRefusedPrivatelyAndAudited(t *testing.T) {
	cases := []struct {
		name string
		who  person
		// own: the request is the clicker's own (dr_smith asked it with
		// an API key).
		own  bool
		want string
	}{
		{"unmapped", stranger, false, "is not mapped to a Countersign principal"},
		{"no approve capability", viewer, false, "Access denied"},
		{"the requester's own request", approver, true, "is never decided by its own requester"},
	}
	for _, sc := range surfaces {
		for _, c := range cases {
			t.Run(sc.name+"/"+c.name, func(t *testing.T) {
				s := sc.new(t)
				w := s.world()
				id := w.restart()
				if c.own {
					id = w.request(w.principal("dr_smith", "member", "person"), "restart_service", map[string]any{"service": "payments"})
				}
				s.drain()
				before := len(w.entries("access_denied"))

				a := s.click(c.who, id, "approve")
				if !strings.Contains(a.private, c.want) {
					t.Errorf("private answer %q, want one saying %q", a.private, c.want)
				}
				if a.card != nil {
					t.Errorf("a refused click changed the clicker's card: %+v", *a.card)
				}
				if it := w.item(id); it.Status != "pending" || len(it.DecidedBy) != 0 {
					t.Errorf("item after a refused click: status %q decided_by %v, want pending", it.Status, it.DecidedBy)
				}
				d := w.entries("access_denied")
				if len(d) != before+1 || d[len(d)-1].Principal != s.who(c.who) {
					t.Errorf("access_denied entries %+v, want one more, by %s", d[before:], s.who(c.who))
				}
				s.drain()
				if n := s.edits(id); n != 0 {
					t.Errorf("%d updates of the card after a refusal, want none", n)
				}
			})
		}
	}
}

// TestReplayedDeliveryIsAppliedOnce: the same click delivered again (the
// platform's retry, or a replay of the signed request) decides nothing
// more and audits nothing more; a new click by someone else on the
// decided item is told the recorded outcome privately and changes
// nothing; the card is updated once.
func TestReplayedDeliveryIsAppliedOnce(t *testing.T) {
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			s.click(approver, id, "approve")
			for range 2 {
				s.replay()
			}
			if n := len(w.entries("action_approved")); n != 1 {
				t.Errorf("%d action_approved entries after a click delivered three times, want 1", n)
			}
			if it := w.item(id); it.Status != "approved" || len(it.DecidedBy) != 1 {
				t.Errorf("item: status %q decided_by %v, want approved once", it.Status, it.DecidedBy)
			}
			late := s.click(second, id, "approve")
			if want := "was already approved by " + s.who(approver); !has(late.private, want, "Nothing was changed") {
				t.Errorf("late click answered %q, want %q and Nothing was changed", late.private, want)
			}
			if it := w.item(id); len(it.DecidedBy) != 1 {
				t.Errorf("a late click changed the decision: decided_by %v", it.DecidedBy)
			}
			s.drain()
			if n := s.edits(id); n != 1 {
				t.Errorf("%d updates of the card, want 1", n)
			}
		})
	}
}

// TestForgedDeliveriesAreRefused: a click whose signature or token does
// not check out (another key, a stale or future time, a changed body, no
// signature at all) is refused with 401 and decides nothing.
func TestForgedDeliveriesAreRefused(t *testing.T) {
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			got := s.forged(id)
			if len(got) < 5 {
				t.Errorf("only %d forgeries tried: %v", len(got), got)
			}
			for name, status := range got {
				if status != 401 {
					t.Errorf("%s: answered %d, want 401", name, status)
				}
			}
			if it := w.item(id); it.Status != "pending" {
				t.Errorf("item after forged clicks: %q, want pending", it.Status)
			}
			if d := w.entries("access_denied"); len(d) != 0 {
				t.Errorf("forged deliveries reached the decision: access_denied %+v", d)
			}
			// The same click, genuine, still decides.
			s.click(approver, id, "approve")
			if it := w.item(id); it.Status != "approved" {
				t.Errorf("the genuine click after the forgeries: item %q, want approved", it.Status)
			}
		})
	}
}

// TestDestructiveApprovalTakesASecondConfirmation: a destructive call's
// Approve is the dangerous button; approving without its confirmation
// step (the first click on Discord and Teams, a Slack click without the
// dialog's mark) decides nothing and says what is missing; through the
// step it is approved by the person who confirmed.
func TestDestructiveApprovalTakesASecondConfirmation(t *testing.T) {
	wantStep := map[string]string{"slack": "takes a confirmation", "discord": "cannot be undone", "teams": "It cannot be undone"}
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			w := s.world()
			id := w.destructive()
			s.drain()
			c := s.card(approver, id)
			if c.danger == "" || !c.has("approve") {
				t.Errorf("destructive card: buttons %v danger %q, want a dangerous Approve", c.buttons, c.danger)
			}
			a := s.unconfirmed(approver, id)
			if !strings.Contains(a.private, wantStep[sc.name]) {
				t.Errorf("approving without the confirmation answered %q, want %q", a.private, wantStep[sc.name])
			}
			if it := w.item(id); it.Status != "pending" {
				t.Fatalf("approving without the confirmation decided: %q, want pending", it.Status)
			}
			s.click(approver, id, "approve")
			if it := w.item(id); it.Status != "approved" || !slices.Equal(it.DecidedBy, []string{s.who(approver)}) {
				t.Errorf("through the confirmation: status %q decided_by %v, want approved by %s", it.Status, it.DecidedBy, s.who(approver))
			}
		})
	}
}

// TestExpiredItemLosesItsButtons: an item the sweeper expires is updated
// in place without buttons, saying it expired; a click on it afterwards
// is told so privately and decides nothing.
func TestExpiredItemLosesItsButtons(t *testing.T) {
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			w.clock.Advance(31 * time.Minute)
			w.sweep()
			s.drain()
			if n := s.edits(id); n != 1 {
				t.Errorf("%d updates of the card after it expired, want 1", n)
			}
			c := s.card(approver, id)
			if len(c.buttons) != 0 || !strings.Contains(c.text, "Expired") {
				t.Errorf("expired card: buttons %v text\n%s\nwant no buttons, Expired", c.buttons, c.text)
			}
			a := s.click(approver, id, "approve")
			if !strings.Contains(a.private, "expired") {
				t.Errorf("a click on the expired item answered %q, want it said to have expired", a.private)
			}
			if it := w.item(id); it.Status != "expired" {
				t.Errorf("item %q after the late click, want expired", it.Status)
			}
		})
	}
}

// TestConcurrentClicksDecideOnce: two approvers clicking at once make one
// decision; the other is told privately who decided it.
func TestConcurrentClicksDecideOnce(t *testing.T) {
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			var wg sync.WaitGroup
			answers := make([]answer, 2)
			for i, p := range []person{approver, second} {
				wg.Go(func() { answers[i] = s.click(p, id, "approve") })
			}
			wg.Wait()
			it := w.item(id)
			if it.Status != "approved" || len(it.DecidedBy) != 1 || len(w.entries("action_approved")) != 1 {
				t.Fatalf("two concurrent clicks: status %q decided_by %v, want approved once", it.Status, it.DecidedBy)
			}
			loser := 1
			if it.DecidedBy[0] == s.who(second) {
				loser = 0
			}
			if want := "approved by " + it.DecidedBy[0]; !strings.Contains(answers[loser].private, want) {
				t.Errorf("the other clicker was told %q, want %q", answers[loser].private, want)
			}
		})
	}
}
