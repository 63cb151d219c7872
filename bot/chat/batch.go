package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/countersign/countersign/bot"
)

// This file is the one eligibility rule of a batch approval, shared by
// every surface that approves several items at once (the typed "approve
// 12 13 14" and the console's selection): every item visible to the
// person, pending, and of one batch (bot.Item.Batch: an action of the same
// tool under the same rule, never destructive or dry-run-first, signed off
// in stages, under a quorum above 1 or step-up). A batch that fails it is
// refused whole, nothing decided. One that passes is still decided item by
// item, each through Decide (the one decision rule, the scope, its own
// audit entry), with Decision.Batch set so that the deciding transaction
// checks the item's batch again as it stands then.

// BatchProblem is why a batch cannot be approved.
type BatchProblem int

// The problems of a batch, in the order CheckBatch looks for them.
const (
	// BatchSize: fewer than two items, or more than MaxBatch.
	BatchSize BatchProblem = iota + 1
	// BatchRepeated: an item is named twice.
	BatchRepeated
	// BatchHidden: the item does not exist or is outside the person's
	// scopes (the two are not told apart).
	BatchHidden
	// BatchDecided: the item already has its outcome.
	BatchDecided
	// BatchIneligible: the item is never approved in a batch (its Batch
	// is ""): destructive, staged, quorum above 1, step-up, not an
	// action request.
	BatchIneligible
	// BatchMixed: the item is of another batch than the first item.
	BatchMixed
)

// BatchRefusal says why a batch of items is refused whole; nothing of it
// was decided.
type BatchRefusal struct {
	Problem BatchProblem
	// ID is the item at fault (0 for BatchSize).
	ID uint64
	// Batch is the item's batch, and First and FirstBatch the first
	// item's, for BatchMixed.
	Batch      string
	First      uint64
	FirstBatch string
}

// Error says what is wrong in a surface's neutral words.
func (r *BatchRefusal) Error() string {
	switch r.Problem {
	case BatchSize:
		return fmt.Sprintf("a batch is 2 to %d items", MaxBatch)
	case BatchRepeated:
		return fmt.Sprintf("#%d is named twice", r.ID)
	case BatchHidden:
		return fmt.Sprintf("#%d is not an item you can see", r.ID)
	case BatchDecided:
		return fmt.Sprintf("#%d is already decided", r.ID)
	case BatchIneligible:
		return fmt.Sprintf("#%d cannot be approved in a batch (it is destructive, signed off in stages, needs several approvers or a fresh sign-in, or is not an action request)", r.ID)
	case BatchMixed:
		return fmt.Sprintf("#%d is %s, but #%d is %s: a batch is items of one tool under one rule", r.ID, r.Batch, r.First, r.FirstBatch)
	}
	return "the batch cannot be approved"
}

// CheckBatch applies the batch rule to items ids as caller sees them now
// and returns the items, in the order given, and their batch (the
// bot.Item.Batch they share). Anything else is a *BatchRefusal (or a
// failure to read the store).
func CheckBatch(ctx context.Context, b *bot.Bot, caller *bot.Caller, ids []uint64) ([]bot.Item, string, error) {
	if len(ids) < 2 || len(ids) > MaxBatch {
		return nil, "", &BatchRefusal{Problem: BatchSize}
	}
	items := make([]bot.Item, 0, len(ids))
	batch := ""
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return nil, "", &BatchRefusal{Problem: BatchRepeated, ID: id}
		}
		it, err := b.Items().Get(ctx, id)
		if errors.Is(err, bot.ErrNoItem) || err == nil && !caller.InScope(it.Space.UserID) {
			return nil, "", &BatchRefusal{Problem: BatchHidden, ID: id}
		}
		if err != nil {
			return nil, "", err
		}
		switch {
		case !it.Pending():
			return nil, "", &BatchRefusal{Problem: BatchDecided, ID: id}
		case it.Batch == "":
			return nil, "", &BatchRefusal{Problem: BatchIneligible, ID: id}
		case batch != "" && it.Batch != batch:
			return nil, "", &BatchRefusal{Problem: BatchMixed, ID: id, Batch: it.Batch, First: ids[0], FirstBatch: batch}
		}
		batch = it.Batch
		items = append(items, it)
	}
	return items, batch, nil
}
