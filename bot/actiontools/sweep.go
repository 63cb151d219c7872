package actiontools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// sweeperName is the principal the sweeper audits as.
const sweeperName = "countersign [sweeper]"

// sweepBatch bounds the requests one sweep transaction changes. Each change
// re-encodes the request, appends an audit entry and queues outbox events;
// 128 keeps one transaction (which holds the store's only writer) to a few
// milliseconds, so writes and queued audits interleave with a large sweep.
const sweepBatch = 128

// Sweep is the "actions" sweep step, a function of now: it times out
// unanswered requests (an action is denied by automatic policy, a question
// expires), and sends one reminder after Options.RemindAfter and one
// escalation after Options.EscalateAfter. It finds due requests with a
// range scan of the deadline index and changes at most sweepBatch per
// transaction. It returns how many requests it changed.
func (s *Service) Sweep(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n, seen, more, closed, err := s.sweepBatch(ctx, now)
		total += n
		for _, id := range closed {
			s.waits.notify(id)
		}
		if err != nil || !more || seen == 0 {
			return total, err
		}
	}
}

// sweepBatch handles up to sweepBatch due index entries in one transaction.
// It returns how many requests it changed and how many index entries it
// consumed.
func (s *Service) sweepBatch(ctx context.Context, now time.Time) (changed, seen int, more bool, closed []string, err error) {
	c := s.b.SystemCall(now)
	err = c.Update(ctx, func(tx *bot.Tx) error {
		changed, seen, more, closed = 0, 0, false, nil
		due, err := approvals.DueRequests(tx, now, sweepBatch)
		if err != nil {
			return err
		}
		more = len(due) == sweepBatch
		seen = len(due)
		for _, e := range due {
			r, err := approvals.LoadRequest(tx, e.ID)
			if err != nil {
				return err
			}
			if r == nil || r.Status != approvals.StatusPending || !r.DueAt.Equal(e.At) {
				// A stale entry: the request was decided or moved.
				if err := approvals.DropDeadline(tx, e.At, e.ID); err != nil {
					return err
				}
				continue
			}
			step := r.Due(now, s.o.RemindAfter, s.o.EscalateAfter)
			sp := r.Space
			if step.Expire {
				if err := expire(tx, r, now); err != nil {
					return err
				}
				closed = append(closed, r.ID)
				changed++
				continue
			}
			if step.Remind {
				r.RemindedAt = now
				note := fmt.Sprintf("Reminder: %s has waited %s for a decision.", r.ID, short(now.Sub(r.CreatedAt)))
				queued := note
				if s.o.ReminderChannel != "" {
					queued = bot.EscalationNote(s.o.ReminderChannel, "") + " " + note
				}
				if err := tx.Emit(r.ItemID, bot.EventReminder, queued); err != nil {
					return err
				}
				if _, err := tx.AuditAs(sweeperName, sp, string(r.Kind)+"_reminder", note); err != nil {
					return err
				}
			}
			if step.Escalate {
				r.EscalatedAt = now
				note := s.escalationNote(now)
				if err := tx.Emit(r.ItemID, bot.EventEscalated, note); err != nil {
					return err
				}
				detail := fmt.Sprintf("%s undecided after %s; escalated %s", r.ID, short(now.Sub(r.CreatedAt)), orDash(note))
				if _, err := tx.AuditAs(sweeperName, sp, string(r.Kind)+"_escalated", detail); err != nil {
					return err
				}
			}
			next := r.NextDue(s.o.RemindAfter, s.o.EscalateAfter)
			if !next.After(now) {
				// Nothing further can fall due by now; never spin on it.
				next = now.Add(time.Second)
			}
			if err := approvals.PutRequest(tx, r, next); err != nil {
				return err
			}
			changed++
		}
		return nil
	})
	return changed, seen, more, closed, err
}

// expire closes pending request r as expired at now, in tx: the automatic
// policy's outcome stored, one audit entry as the sweeper, the chat update
// and the callback queued. The sweeper calls it when it finds r due; a
// decision or a status read that finds r past its expiry first calls it
// too, so the expiry is recorded once, by whichever comes first.
func expire(tx *bot.Tx, r *approvals.Request, now time.Time) error {
	reason := expiryReason(r)
	if !r.Close(approvals.StatusExpired, reason, now) {
		return nil
	}
	if err := approvals.PutRequest(tx, r, time.Time{}); err != nil {
		return err
	}
	if _, err := tx.AuditAs(sweeperName, r.Space, auditName(r), r.ID+": "+reason); err != nil {
		return err
	}
	return decided(tx, r)
}

// expiryReason is the automatic-policy outcome of a request that timed out.
func expiryReason(r *approvals.Request) string {
	if r.Action != nil {
		return policy.HeadlessDenial(policy.Category(r.Action.Category))
	}
	return fmt.Sprintf("nobody answered within %s.", short(r.ExpiresAt.Sub(r.CreatedAt)))
}

// escalationNote names the escalation target for the chat adapters at
// now: the channel, the role, and the person on call in the rotation
// (Options.EscalationOnCall) at now.
func (s *Service) escalationNote(now time.Time) string {
	note := bot.EscalationNote(s.o.EscalationChannel, s.o.EscalationRole)
	if s.o.EscalationOnCall == "" {
		return note
	}
	return strings.TrimSpace(note + " " + bot.OnCallNote(s.o.EscalationOnCall, s.b.OnCallNow(s.o.EscalationOnCall, now)))
}

// short renders a duration without trailing zero units: 10m, 1h30m, 45s.
func short(d time.Duration) string {
	d = d.Round(time.Second)
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
