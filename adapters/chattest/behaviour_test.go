package chattest

import (
	"context"
	"errors"
	"fmt"
	"github.com/countersign/countersign/bot"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEligibleClickApprovesAndUpdatesTheCard: the card is posted with
// Approve and Reject; a mapped member's click approves it as that member
// (surface id included), with no private answer (on Discord and Teams
// the clicked card is answered in place, decided); the card is then
// updated once in place, without buttons, saying who approved and when,
// and still showing what was asked.
func TestEligibleClickApprovesAndUpdatesTheCard(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			posted := s.card(approver, id)
			if !posted.has("approve") || !posted.has("reject") {
				t.Errorf("posted card's buttons = %v, want approve and reject", posted.buttons)
			}
			if !has(posted.text, "restart_service", "payments") {
				t.Errorf("posted card says\n%s\nwant it to name the call: restart_service on payments", posted.text)
			}
			if posted.danger != "" {
				t.Errorf("a mutating call's Approve is styled dangerous (%q), want a plain Approve", posted.danger)
			}

			a := s.click(approver, id, "approve")
			if a.private != "" {
				t.Errorf("the approver was told privately %q, want nothing", a.private)
			}
			switch {
			case sc.inPlace && a.card == nil:
				t.Errorf("the click was answered %+v, want the decided card in place", a)
			case a.card != nil && (len(a.card.buttons) != 0 || !has(a.card.text, sc.approved...)):
				t.Errorf("the card answered in place: buttons %v text\n%s\nwant no buttons and %q", a.card.buttons, a.card.text, sc.approved)
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
			if len(c.buttons) != 0 || !has(c.text, sc.approved...) || !has(c.text, "restart_service", "payments") {
				t.Errorf("updated card: buttons %v text\n%s\nwant no buttons, %q, and the call", c.buttons, c.text, sc.approved)
			}
		})
	}
}

// TestIneligibleClicksAreRefusedPrivatelyAndAudited: an unmapped person
// (on Approve or on Reject), a viewer (no approve capability) and the
// requester themself are each refused in a private answer that says why;
// the refusal is audited once, under the clicker's surface identity and
// with its reason, even when the click is delivered again; the item
// stays pending and its card is not touched.
func TestIneligibleClicksAreRefusedPrivatelyAndAudited(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		who    person
		button string
		// own: the request is the clicker's own (dr_smith asked it with
		// an API key).
		own  bool
		want string
	}{
		{"unmapped", stranger, "approve", false, "is not mapped to a Countersign principal"},
		{"unmapped, on Reject", stranger, "reject", false, "is not mapped to a Countersign principal"},
		{"no approve capability", viewer, "approve", false, "requires the 'approve' capability"},
		{"the requester's own request", approver, "approve", true, "is never decided by its own requester"},
	}
	for _, sc := range surfaces {
		for _, c := range cases {
			t.Run(sc.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				s := sc.new(t)
				w := s.world()
				id := w.restart()
				if c.own {
					id = w.request(w.principal("dr_smith", "member", "person"), "restart_service", map[string]any{"service": "payments"})
				}
				s.drain()
				before := len(w.entries("access_denied"))

				a := s.click(c.who, id, c.button)
				if !strings.Contains(a.private, c.want) || (sc.name == "slack" && a.n != 1) {
					t.Errorf("private answer %q (in %d messages), want one saying %q", a.private, a.n, c.want)
				}
				if a.card != nil {
					t.Errorf("a refused click answered the card %+v in place, want only a private answer", *a.card)
				}
				if it := w.item(id); it.Status != "pending" || len(it.DecidedBy) != 0 {
					t.Errorf("item after a refused click: status %q decided_by %v, want pending", it.Status, it.DecidedBy)
				}
				d := w.entries("access_denied")
				if len(d) != before+1 || d[len(d)-1].Principal != s.who(c.who) {
					t.Fatalf("access_denied entries %+v, want one more, by %s", d[before:], s.who(c.who))
				}
				audit := []string{c.want}
				if c.who == stranger {
					audit = []string{fmt.Sprintf("%s: %s #%d refused", sc.name, c.button, id), "is not mapped to a principal"}
				}
				if en := d[len(d)-1]; !has(en.Detail, audit...) {
					t.Errorf("the refusal's audit detail %q, want %q", en.Detail, audit)
				}
				s.replay()
				if n := len(w.entries("access_denied")); n != before+1 {
					t.Errorf("%d access_denied entries after the refused click was delivered again, want %d", n, before+1)
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
// more and audits nothing more; it is dropped silently on Slack and
// answered with the recorded outcome elsewhere. A new click by someone
// else on the decided item is told the recorded outcome privately and
// changes nothing; the card is updated once.
func TestReplayedDeliveryIsAppliedOnce(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			s.click(approver, id, "approve")
			recorded := fmt.Sprintf("#%d was already approved by %s at 2026-03-01 09:00 UTC. Nothing was changed.", id, s.who(approver))
			for range 2 {
				a := s.replay()
				if sc.replaySilent && a.private != "" {
					t.Errorf("a replayed delivery was answered %q, want it dropped silently", a.private)
				}
				if !sc.replaySilent && !strings.Contains(a.private, recorded) {
					t.Errorf("a replayed delivery was answered %q, want %q", a.private, recorded)
				}
			}
			if n := len(w.entries("action_approved")); n != 1 {
				t.Errorf("%d action_approved entries after a click delivered three times, want 1", n)
			}
			if it := w.item(id); it.Status != "approved" || len(it.DecidedBy) != 1 {
				t.Errorf("item: status %q decided_by %v, want approved once", it.Status, it.DecidedBy)
			}
			late := s.click(second, id, "approve")
			if !strings.Contains(late.private, recorded) {
				t.Errorf("late click answered %q, want %q", late.private, recorded)
			}
			if it := w.item(id); len(it.DecidedBy) != 1 || len(w.entries("action_approved")) != 1 {
				t.Errorf("after a late click: decided_by %v, want only %s", it.DecidedBy, s.who(approver))
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
// signature at all) is refused with 401 and reaches nothing; the genuine
// click still decides.
func TestForgedDeliveriesAreRefused(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			got := s.forged(id)
			if len(got) < 5 {
				t.Errorf("only %d forgeries tried (%v), want at least 5", len(got), got)
			}
			for name, status := range got {
				if status != http.StatusUnauthorized {
					t.Errorf("%s: answered %d, want 401", name, status)
				}
			}
			if it := w.item(id); it.Status != "pending" {
				t.Errorf("item after forged clicks: %q, want pending", it.Status)
			}
			if d := w.entries("access_denied"); len(d) != 0 {
				t.Errorf("forged deliveries reached the decision: access_denied %+v, want none", d)
			}
			s.click(approver, id, "approve")
			if it := w.item(id); it.Status != "approved" {
				t.Errorf("the genuine click after the forgeries: item %q, want approved", it.Status)
			}
		})
	}
}

// TestDuplicateKeysInAClickAreRefused: a genuine, signed click whose JSON
// gives the deciding key twice (a harmless value, then Approve) is
// refused with a 400 naming the key, and nothing is decided: two readers
// of the body could see different buttons.
func TestDuplicateKeysInAClickAreRefused(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			status, body, key := s.doubled(id)
			if want := key + ": is given more than once"; status != http.StatusBadRequest || !strings.Contains(body, want) {
				t.Errorf("a click with %s twice answered %d %q, want 400 saying %q", key, status, body, want)
			}
			s.click(viewer, id, "approve") // a later click: the doubled one, had it been queued, was decided before it
			if it := w.item(id); it.Status != "pending" || len(w.entries("action_approved")) != 0 {
				t.Errorf("after the refused click: status %q, want pending", it.Status)
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
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.destructive()
			s.drain()
			c := s.card(approver, id)
			if c.danger == "" || !c.has("approve") || !c.has("reject") {
				t.Errorf("destructive card: buttons %v danger %q, want a dangerous Approve and a Reject", c.buttons, c.danger)
			}
			a := s.unconfirmed(approver, id)
			if !strings.Contains(a.private, sc.step) {
				t.Errorf("approving without the confirmation answered %q, want %q", a.private, sc.step)
			}
			if it := w.item(id); it.Status != "pending" || len(w.entries("action_approved")) != 0 {
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
// once in place, without buttons, saying it expired and when; a click on
// it afterwards is told so privately and decides nothing.
func TestExpiredItemLosesItsButtons(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
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
			if len(c.buttons) != 0 || !has(c.text, sc.expired...) {
				t.Errorf("expired card: buttons %v text\n%s\nwant no buttons and %q", c.buttons, c.text, sc.expired)
			}
			a := s.click(approver, id, "approve")
			if want := fmt.Sprintf("#%d was already expired at 2026-03-01 09:31 UTC. Nothing was changed.", id); !strings.Contains(a.private, want) {
				t.Errorf("a click on the expired item answered %q, want %q", a.private, want)
			}
			if it := w.item(id); it.Status != "expired" || len(w.entries("action_approved")) != 0 {
				t.Errorf("item %q after the late click, want expired", it.Status)
			}
		})
	}
}

// TestConcurrentClicksDecideOnce: two approvers clicking at once make one
// decision; the winner's click is answered as a decision, the other is
// told privately who decided it.
func TestConcurrentClicksDecideOnce(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
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
			winner, loser := 0, 1
			if it.DecidedBy[0] == s.who(second) {
				winner, loser = 1, 0
			}
			if want := "approved by " + it.DecidedBy[0]; !strings.Contains(answers[loser].private, want) {
				t.Errorf("the other clicker was told %q, want %q", answers[loser].private, want)
			}
			if a := answers[winner]; a.private != "" || (sc.inPlace && a.card == nil) {
				t.Errorf("the winner was answered %+v, want the decision (no private answer)", a)
			}
		})
	}
}

// TestRejectAsksForAReason: Reject opens a form for the reason and
// decides nothing; an empty (blank) reason is refused, privately, and the
// form stays; a reason rejects the item as the person who gave it, and
// the card is updated once, without buttons, showing the reason with its
// markup inert.
func TestRejectAsksForAReason(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			a := s.reject(second, id, "   \n ")
			if !strings.Contains(a.private, sc.noReason) {
				t.Errorf("a blank reason answered %q, want %q", a.private, sc.noReason)
			}
			if it := w.item(id); it.Status != "pending" {
				t.Fatalf("after a blank reason: %q, want pending", it.Status)
			}
			const reason = "Not during the freeze <!channel> @here"
			a = s.reject(second, id, reason)
			if a.private != "" {
				t.Errorf("the rejection answered privately %q, want nothing", a.private)
			}
			switch {
			case sc.inPlace && a.card == nil:
				t.Errorf("the rejection was answered %+v, want the decided card in place", a)
			case a.card != nil && (len(a.card.buttons) != 0 || !has(a.card.text, sc.rejected...)):
				t.Errorf("the card answered in place: buttons %v text\n%s\nwant no buttons and %q", a.card.buttons, a.card.text, sc.rejected)
			}
			it := w.item(id)
			if it.Status != "denied" || it.Reason != reason || !slices.Equal(it.DecidedBy, []string{s.who(second)}) {
				t.Fatalf("after the reason: status %q reason %q decided_by %v, want denied by %s with the reason as given", it.Status, it.Reason, it.DecidedBy, s.who(second))
			}
			s.drain()
			if n := s.edits(id); n != 1 {
				t.Errorf("%d updates of the card, want 1", n)
			}
			c := s.card(second, id)
			if len(c.buttons) != 0 || !has(c.text, sc.rejected...) {
				t.Errorf("rejected card: buttons %v text\n%s\nwant no buttons and %q", c.buttons, c.text, sc.rejected)
			}
		})
	}
}

// TestRemindersAndEscalationsReplyInTheThread: a reminder and an
// escalation are posted as replies in the thread of the item's card, the
// agent-supplied note with its markup inert, the escalation naming the
// role (and, on Slack and Teams, mentioning its members); once the item is decided, a reminder is no longer posted.
func TestRemindersAndEscalationsReplyInTheThread(t *testing.T) {
	t.Parallel()
	const note = "Reminder: waited 10m @here <!channel> <@&456>"
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			w.emit(id, bot.EventReminder, note)
			w.emit(id, bot.EventEscalated, "role=member")
			s.drain()
			got := s.replies(id)
			if len(got) != 2 {
				t.Fatalf("replies in the card's thread %q, want a reminder and an escalation", got)
			}
			if !has(got[0], sc.reminder...) {
				t.Errorf("reminder %q, want %q", got[0], sc.reminder)
			}
			if !has(got[1], sc.escalation...) {
				t.Errorf("escalation %q, want %q", got[1], sc.escalation)
			}
			for _, live := range sc.live {
				for _, r := range got {
					if strings.Contains(r, live) {
						t.Errorf("reply %q holds the live markup %q, want it inert", r, live)
					}
				}
			}
			s.click(approver, id, "approve")
			w.emit(id, bot.EventReminder, "late")
			s.drain()
			if n := len(s.replies(id)); n != 2 {
				t.Errorf("%d replies after a reminder for the decided item, want still 2 (not posted)", n)
			}
		})
	}
}

// TestQuorumShowsTheTally: with a quorum of two, the first approval is
// counted and the item stays pending; the approver is shown the tally
// (privately on Slack, on the card in place elsewhere), and the same
// approval clicked again counts once; the card is updated with the tally
// and keeps its buttons for the others; the second approver decides it.
func TestQuorumShowsTheTally(t *testing.T) {
	t.Parallel()
	const tally = "1 of 2 approvals: dr_smith"
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.quorum()
			s.drain()
			for _, click := range []string{"the first approval", "the same approval again"} {
				a := s.click(approver, id, "approve")
				shown := a.private
				if a.card != nil {
					shown = a.card.text
				}
				if !strings.Contains(shown, tally) {
					t.Errorf("%s showed the approver %q, want the tally %q", click, shown, tally)
				}
				if sc.inPlace && a.card == nil {
					t.Errorf("%s was answered %+v, want the card in place", click, a)
				}
				if sc.name == "discord" && a.card != nil && !a.card.has("approve") {
					// Discord's card is everyone's: its buttons stay for
					// the others (Teams' is the approver's own view).
					t.Errorf("%s answered the card with buttons %v, want Approve kept for the others", click, a.card.buttons)
				}
				if it := w.item(id); it.Status != "pending" || !strings.Contains(it.Tally, "1 of 2") {
					t.Fatalf("after %s: status %q tally %q, want pending at 1 of 2", click, it.Status, it.Tally)
				}
			}
			s.drain()
			if n := s.edits(id); n != 1 {
				t.Errorf("%d updates of the card after the first approval, want 1 (the tally)", n)
			}
			c := s.card(second, id)
			if !c.has("approve") || !c.has("reject") || !strings.Contains(c.text, tally) {
				t.Errorf("card after the first approval: buttons %v text\n%s\nwant Approve, Reject and %q", c.buttons, c.text, tally)
			}
			s.click(second, id, "approve")
			if it := w.item(id); it.Status != "approved" || len(it.DecidedBy) != 2 {
				t.Errorf("after the second approval: status %q decided_by %v, want approved by both", it.Status, it.DecidedBy)
			}
			s.drain()
			if c := s.card(second, id); len(c.buttons) != 0 || !has(c.text, "Approved") {
				t.Errorf("card after the quorum: buttons %v text\n%s\nwant no buttons, Approved", c.buttons, c.text)
			}
		})
	}
}

// TestDeliveryHonoursRetryAfter: a rate-limited post is a
// bot.RetryAfterError of the wait the platform asked for; through the
// outbox the event is kept, not due again before that wait, and posted
// after it.
func TestDeliveryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.throttle(sc.retryAfter)
			err := w.deliver(s.name(), s.renderer(), bot.Event{Type: bot.EventCreated, ItemID: id})
			var ra *bot.RetryAfterError
			if !errors.As(err, &ra) || ra.After != sc.retryAfter {
				t.Fatalf("a rate-limited post delivered as %v, want a RetryAfterError of %v", err, sc.retryAfter)
			}
			s.throttle(sc.retryAfter)
			s.drain() // the queued event meets the rate limit again
			if n := w.depth(s.name()); n != 1 {
				t.Fatalf("outbox depth %d after a rate limit, want the event kept (1)", n)
			}
			early := w.clock.Now().Add(sc.retryAfter - time.Second)
			if due, err := w.bot.Outbox().Due(context.Background(), s.name(), early, 10); err != nil || len(due) != 0 {
				t.Errorf("due a second before the wait ends: %+v (%v), want nothing", due, err)
			}
			w.clock.Advance(sc.retryAfter + time.Second)
			s.drain()
			if n := w.depth(s.name()); n != 0 {
				t.Errorf("outbox depth %d after the wait, want 0", n)
			}
			if c := s.card(approver, id); !c.has("approve") {
				t.Errorf("card posted after the wait: buttons %v, want Approve", c.buttons)
			}
		})
	}
}

// TestDeliveryFailuresAreClassified: a post the platform refuses for
// good (the channel is gone, the bot may not post there) is a
// bot.PermanentError, which the outbox does not retry; one refused while
// the platform is down is not, and is retried; an item that does not
// exist is permanent.
func TestDeliveryFailuresAreClassified(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		for _, permanent := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/permanent=%v", sc.name, permanent), func(t *testing.T) {
				t.Parallel()
				s := sc.new(t)
				w := s.world()
				id := w.restart()
				s.refuse(permanent)
				err := w.deliver(s.name(), s.renderer(), bot.Event{Type: bot.EventCreated, ItemID: id})
				var perm *bot.PermanentError
				if err == nil || errors.As(err, &perm) != permanent {
					t.Errorf("delivered as %v (%T), want an error, permanent %v", err, err, permanent)
				}
				err = w.deliver(s.name(), s.renderer(), bot.Event{Type: bot.EventCreated, ItemID: 999})
				if !errors.As(err, &perm) {
					t.Errorf("an unknown item delivered as %v, want a PermanentError", err)
				}
			})
		}
	}
}

// TestRestartUpdatesTheOriginalCard: after a restart, a click on a card
// posted before it updates that card in place (the message is found from
// the store), nothing is posted again, and an item created while the
// surface was down is posted once it is back.
func TestRestartUpdatesTheOriginalCard(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			before := s.card(approver, id)
			late := w.destructive() // queued, not yet delivered
			s.restart()
			w.clock.Advance(time.Minute)
			a := s.click(approver, id, "approve")
			if it := w.item(id); it.Status != "approved" {
				t.Fatalf("a click after the restart: item %q, want approved", it.Status)
			}
			if sc.inPlace && a.card == nil {
				t.Errorf("the click after the restart was answered %+v, want the decided card in place", a)
			}
			s.drain()
			if n := s.edits(id); n != 1 {
				t.Errorf("%d updates of the card posted before the restart, want 1", n)
			}
			if c := s.card(approver, id); len(c.buttons) != 0 || !has(c.text, "Approved") || len(before.buttons) == 0 {
				t.Errorf("the original card after the restart: buttons %v text\n%s\nwant it updated, no buttons, Approved", c.buttons, c.text)
			}
			if got := w.item(late).Messages; len(got) != 1 || got[0].ChannelID != ref(t, w, s.name(), id).ChannelID {
				t.Errorf("the item created before the restart has messages %+v, want it posted once, in its tool's channel", got)
			} else if c := s.card(approver, late); !c.has("approve") {
				t.Errorf("the item created before the restart was posted with buttons %v, want Approve", c.buttons)
			}
			if got := w.item(id).Messages; len(got) != 1 {
				t.Errorf("the item posted before the restart has messages %+v, want still one (not posted again)", got)
			}
		})
	}
}

// TestQuestionsAreAnswered: a question's options are its buttons (one
// choice) or a choice set (several), with Decline; a person's choice
// answers it with those options, as the agent then reads them; an index
// the question does not have is refused privately and answers nothing;
// the answered card keeps no buttons.
func TestQuestionsAreAnswered(t *testing.T) {
	t.Parallel()
	startsWith := func(c card, prefix string) bool {
		for _, b := range c.buttons {
			if strings.HasPrefix(b, prefix) {
				return true
			}
		}
		return false
	}
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			single := w.ask("Which region should the failover use?", false, "eu-west-1", "us-east-1")
			multi := w.ask("Which checks may be skipped?", true, "lint", "unit", "e2e")
			s.drain()
			if c := s.card(approver, single); !startsWith(c, "answer") || !c.has("reject") {
				t.Errorf("one-choice question's buttons %v, want its options and Decline", c.buttons)
			}
			if c := s.card(approver, multi); !(c.has("submit") || c.has("select") || c.has("answer_multi")) || !c.has("reject") {
				t.Errorf("several-choice question's buttons %v, want a choice set and Decline", c.buttons)
			}
			s.answer(approver, single, 1)
			if it, got := w.item(single), w.answers(single); it.Status != "answered" || !slices.Equal(got, []string{"us-east-1"}) {
				t.Errorf("after choosing option 1: status %q answers %v, want answered us-east-1", it.Status, got)
			}
			bad := s.answer(approver, multi, 0, 7)
			if want := fmt.Sprintf("is not one of #%d's options; nothing was recorded.", multi); !strings.Contains(bad.private, want) {
				t.Errorf("choosing an option the question lacks answered %q, want %q", bad.private, want)
			}
			if it := w.item(multi); it.Status != "pending" {
				t.Fatalf("after an option the question lacks: %q, want pending", it.Status)
			}
			s.answer(approver, multi, 0, 2)
			if it, got := w.item(multi), w.answers(multi); it.Status != "answered" || !slices.Equal(got, []string{"lint", "e2e"}) {
				t.Errorf("after choosing options 0 and 2: status %q answers %v, want answered lint, e2e", it.Status, got)
			}
			s.drain()
			if c := s.card(approver, multi); len(c.buttons) != 0 || !strings.Contains(c.text, "Answered") {
				t.Errorf("answered card: buttons %v text\n%s\nwant no buttons, Answered", c.buttons, c.text)
			}
		})
	}
}

// TestSensitiveDetailIsShownOnlyToApprovers: a sensitive item's card in
// the channel withholds its arguments (and, once decided, its reason);
// those who may decide it read the detail privately (Slack sends it to
// each approver when it posts the card; Discord and Teams show it on the
// Details button, audited as view_sensitive); a viewer and an unmapped
// person never see it, and on the Details button are told why (the
// viewer's refusal audited).
func TestSensitiveDetailIsShownOnlyToApprovers(t *testing.T) {
	t.Parallel()
	const secret = "HIV positive"
	shown := func(a answer) string {
		out := a.private + "\n" + a.detail
		if a.card != nil {
			out += "\n" + a.card.text
		}
		return out
	}
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.sensitive()
			s.drain()
			if c := s.card(viewer, id); strings.Contains(c.text, secret) {
				t.Errorf("the channel card shows %q of a sensitive item, want it withheld:\n%s", secret, c.text)
			}
			if c := s.card(approver, id); !c.has("approve") || !c.has("reject") || strings.Contains(c.text, secret) {
				t.Errorf("the approver's card: buttons %v, want Approve and Reject, and the detail withheld from it:\n%s", c.buttons, c.text)
			} else if sc.name == "discord" && !c.has("details") {
				t.Errorf("the card's buttons %v, want Details (Discord's card is everyone's; Details is how an approver reads it)", c.buttons)
			}
			for _, p := range []person{approver, second} {
				if got := shown(s.details(p, id)); !strings.Contains(got, secret) {
					t.Errorf("%s's private detail %q, want %q", names[p], got, secret)
				}
			}
			denied := len(w.entries("access_denied"))
			for p, why := range map[person]string{viewer: "they are shown only to approvers who may decide it", stranger: "is not mapped to a Countersign principal"} {
				a := s.details(p, id)
				if got := shown(a); strings.Contains(got, secret) {
					t.Errorf("person %v was shown %q, want the detail withheld", p, got)
				}
				if sc.detailsAsked && !strings.Contains(a.private, why) {
					t.Errorf("person %v on Details was told %q, want %q", p, a.private, why)
				}
			}
			if sc.detailsAsked {
				if v := w.entries("view_sensitive"); len(v) != 2 || v[0].Principal != s.who(approver) {
					t.Errorf("view_sensitive entries %+v, want the two approvers' views, the first by %s", v, s.who(approver))
				}
				if n := len(w.entries("access_denied")); n < denied+2 {
					t.Errorf("%d access_denied entries after the viewer's and the stranger's Details, want %d", n, denied+2)
				}
			}
			s.reject(approver, id, "confirmed by the lab")
			s.drain()
			if c := s.card(viewer, id); strings.Contains(c.text, "confirmed by the lab") || strings.Contains(c.text, secret) {
				t.Errorf("the decided channel card shows the sensitive item's reason or detail, want both withheld:\n%s", c.text)
			}
		})
	}
}

// TestPendingItemIsPostedOnce: a pending item is posted, with the bot's
// credentials, to its tool's channel, with Approve and Reject, and its
// message recorded with it; its created event delivered again posts
// nothing more.
func TestPendingItemIsPostedOnce(t *testing.T) {
	t.Parallel()
	for _, sc := range surfaces {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := sc.new(t)
			w := s.world()
			id := w.restart()
			s.drain()
			if n := s.posts(); n != 1 {
				t.Fatalf("%d cards posted, want 1", n)
			}
			if got, want := ref(t, w, s.name(), id).ChannelID, s.channel("ops"); got != want {
				t.Errorf("posted in %s, want the tool's channel ops (%s)", got, want)
			}
			if c := s.card(approver, id); !c.has("approve") || !c.has("reject") {
				t.Errorf("posted card's buttons %v, want Approve and Reject", c.buttons)
			}
			w.emit(id, bot.EventCreated, "")
			s.drain()
			if n := s.posts(); n != 1 {
				t.Errorf("%d cards posted after the created event was delivered again, want still 1", n)
			}
			if got := w.item(id).Messages; len(got) != 1 {
				t.Errorf("the item's messages %+v, want the one posted", got)
			}
		})
	}
}
