package chattest

import (
	"slices"
	"strings"
	"testing"
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
