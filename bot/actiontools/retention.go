package actiontools

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// PruneRequests is the "retention_requests" sweep step: it deletes the
// requests of each kind closed more than that kind's retention before now
// (Options.Retention; zero keeps them), with their chat items and
// action_id records, in transactions of at most bot.RetentionBatch; each
// transaction appends audit entries naming what it deleted and under which
// setting. Pending requests are never touched. Requests closed before the
// retention index existed are indexed first, once.
func (s *Service) PruneRequests(ctx context.Context, now time.Time) (int, error) {
	r := s.o.Retention
	if r.Actions <= 0 && r.Consents <= 0 && r.Questions <= 0 && r.ActionIDs <= 0 {
		return 0, nil
	}
	if err := s.backfill(ctx); err != nil {
		return 0, err
	}
	total := 0
	for _, k := range []struct {
		kind    approvals.RequestKind
		keep    time.Duration
		setting string
		noun    string
	}{
		{approvals.KindActionRequest, r.Actions, "action_requests", "action requests"},
		{approvals.KindConsentRequest, r.Consents, "consent_requests", "consent requests"},
		{approvals.KindQuestionRequest, r.Questions, "questions", "questions"},
	} {
		if k.keep <= 0 {
			continue
		}
		cutoff := now.Add(-k.keep)
		c := s.b.SystemCall(now)
		for {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			var n int
			var more bool
			err := c.Update(ctx, func(tx *bot.Tx) error {
				n, more = 0, false
				ids, m, err := approvals.ClosedBefore(tx, k.kind, cutoff, bot.RetentionBatch)
				if err != nil || len(ids) == 0 {
					return err
				}
				more = m
				var gone []string
				for _, id := range ids {
					req, err := approvals.DeleteRequest(tx, id)
					if err != nil {
						return err
					}
					if req == nil {
						continue
					}
					if err := bot.DropItem(tx, req.ItemID); err != nil {
						return err
					}
					gone = append(gone, id)
				}
				n = len(gone)
				if n == 0 {
					return nil
				}
				head := fmt.Sprintf("deleted %d %s closed before %s (retention.%s %s)",
					n, k.noun, cutoff.UTC().Format(time.RFC3339), k.setting, k.keep)
				return tx.AuditDeleted(sweeperName, bot.ActionRetentionPruned, head, gone)
			})
			if err != nil {
				return total, err
			}
			total += n
			if !more {
				break
			}
		}
	}
	if r.Actions > 0 {
		n, err := s.pruneReviews(ctx, now, now.Add(-r.Actions))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneReviews deletes the break-glass reviews cleared before cutoff
// (retention.action_requests, the break-glass approvals' own retention),
// with their items, in transactions of at most bot.RetentionBatch, each
// audited. An open review is kept, however old: it blocks its breaker's
// next break-glass until it is countersigned.
func (s *Service) pruneReviews(ctx context.Context, now, cutoff time.Time) (int, error) {
	// Most sweeps find nothing to prune: look first in a read
	// transaction, so that they take no write transaction for it.
	var found []*approvals.Review
	if err := s.b.Store().View(ctx, func(tx kv.Tx) error {
		var err error
		found, err = approvals.ClearedReviewsBefore(tx, cutoff, 1)
		return err
	}); err != nil || len(found) == 0 {
		return 0, err
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		err := s.b.SystemCall(now).Update(ctx, func(tx *bot.Tx) error {
			rvs, err := approvals.ClearedReviewsBefore(tx, cutoff, bot.RetentionBatch)
			if err != nil || len(rvs) == 0 {
				n = 0
				return err
			}
			ids := make([]string, 0, len(rvs))
			for _, rv := range rvs {
				if err := approvals.DeleteReview(tx, rv); err != nil {
					return err
				}
				if err := bot.DropItem(tx, rv.ItemID); err != nil {
					return err
				}
				ids = append(ids, rv.ID)
			}
			n = len(ids)
			head := fmt.Sprintf("deleted %d break-glass reviews cleared before %s (retention.action_requests %s)",
				n, cutoff.UTC().Format(time.RFC3339), s.o.Retention.Actions)
			return tx.AuditDeleted(sweeperName, bot.ActionRetentionPruned, head, ids)
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < bot.RetentionBatch {
			return total, nil
		}
	}
}

// PruneActionIDs is the "retention_action_ids" sweep step: it forgets the
// action_id records of requests closed more than Options.Retention.ActionIDs
// before now (zero keeps them), in transactions of at most
// bot.RetentionBatch. The requests stay (their own retention applies); an
// agent that sends such an action_id again starts a new request.
func (s *Service) PruneActionIDs(ctx context.Context, now time.Time) (int, error) {
	keep := s.o.Retention.ActionIDs
	if keep <= 0 {
		return 0, nil
	}
	if err := s.backfill(ctx); err != nil {
		return 0, err
	}
	cutoff := now.Add(-keep)
	return bot.InBatches(ctx, s.b.Store(), func(tx kv.Tx) (int, bool, error) {
		return approvals.ExpireActionIDs(tx, cutoff, bot.RetentionBatch)
	})
}

// backfill indexes the requests closed before the retention index existed.
func (s *Service) backfill(ctx context.Context) error {
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.b.Store().Update(ctx, func(tx kv.Tx) error {
			var err error
			_, done, err = approvals.IndexClosed(tx, 4*bot.RetentionBatch)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
