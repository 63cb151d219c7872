package memorytools

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
)

// pruneClosed is the "retention_memory_proposals" sweep step: it deletes
// the proposals closed without being applied (rejected, stale, expired)
// more than memory.Options.ProposalRetention before now, with their chat
// items, in transactions of at most bot.RetentionBatch; each transaction
// appends audit entries naming what it deleted. Zero retention keeps
// them all. Proposals closed before the retention index existed are
// indexed first, once.
func (t *tools) pruneClosed(ctx context.Context, now time.Time) (int, error) {
	keep := t.o.ProposalRetention
	if keep <= 0 {
		return 0, nil
	}
	store := t.b.Store()
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := store.Update(ctx, func(tx kv.Tx) error {
			var err error
			done, err = memory.IndexClosed(tx, 4*bot.RetentionBatch)
			return err
		}); err != nil {
			return 0, err
		}
	}
	cutoff := now.Add(-keep)
	c := t.b.SystemCall(now)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		var more bool
		err := c.Update(ctx, func(tx *bot.Tx) error {
			gone, m, err := memory.DeleteClosedBefore(tx, cutoff, bot.RetentionBatch)
			n, more = len(gone), m
			if err != nil || len(gone) == 0 {
				return err
			}
			ids := make([]string, 0, len(gone))
			for _, f := range gone {
				if err := bot.DropItem(tx, f.ItemID); err != nil {
					return err
				}
				ids = append(ids, fmt.Sprintf("%s/%s/%s#%d", f.Space.UserID, f.Space.AgentID, f.Space.RunID, f.ID))
			}
			head := fmt.Sprintf("deleted %d memory proposals closed before %s (retention.memory_proposals %s)",
				len(gone), cutoff.UTC().Format(time.RFC3339), keep)
			return tx.AuditDeleted(c.Caller.String(), bot.ActionRetentionPruned, head, ids)
		})
		if err != nil {
			return total, err
		}
		total += n
		if !more {
			return total, nil
		}
	}
}
