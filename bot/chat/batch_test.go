package chat_test

import (
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign/bot/chat"
)

// TestCheckBatch is the one batch rule as every surface applies it: items
// of one tool under one rule, pending, visible; anything else refused
// whole, saying which item and why. An approval of a batch is checked
// again in its deciding transaction (Decision.Batch): an item that is not
// of the batch named is refused there, nothing recorded.
func TestCheckBatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.request("set_dose", "patient_42"), e.request("set_dose", "patient_42")
	other := e.request("set_dose", "patient_99")
	drop := e.request("delete_database", "patient_42")
	quorum := e.request("rollback", "patient_42")
	smith := e.b.Chat().Caller("slack", uSmith, nil)
	scoped := e.b.Chat().Caller("slack", uScoped, nil)

	items, batch, err := chat.CheckBatch(ctx, e.b, smith, []uint64{a, b, other})
	if err != nil || batch != "set_dose, no rule" || len(items) != 3 || items[0].ID != a || items[2].ID != other {
		t.Fatalf("a batch of three set_dose: %v, %q, %v; want 3 items from #%d to #%d, batch %q", items, batch, err, a, other, "set_dose, no rule")
	}
	for _, tc := range []struct {
		name   string
		caller int // 0 smith, 1 scoped
		ids    []uint64
		want   chat.BatchProblem
		at     uint64
	}{
		{"one item", 0, []uint64{a}, chat.BatchSize, 0},
		{"twice", 0, []uint64{a, b, a}, chat.BatchRepeated, a},
		{"no such item", 0, []uint64{a, 999}, chat.BatchHidden, 999},
		{"out of scope", 1, []uint64{a, other}, chat.BatchHidden, other},
		{"destructive", 0, []uint64{a, drop}, chat.BatchIneligible, drop},
		{"a quorum", 0, []uint64{quorum, a}, chat.BatchIneligible, quorum},
	} {
		who := smith
		if tc.caller == 1 {
			who = scoped
		}
		_, _, err := chat.CheckBatch(ctx, e.b, who, tc.ids)
		var br *chat.BatchRefusal
		if !errors.As(err, &br) || br.Problem != tc.want || br.ID != tc.at {
			t.Errorf("%s: %v, want problem %d at #%d", tc.name, err, tc.want, tc.at)
		}
	}
	if out := chat.Decide(ctx, e.b, chat.Decision{Surface: "slack", UserID: uSmith, ItemID: a, Verb: chat.Approve, Batch: "set_dose, rule 1"}); out.Status != chat.Invalid {
		t.Fatalf("an approval naming another batch: %+v, want invalid", out)
	}
	if out := chat.Decide(ctx, e.b, chat.Decision{Surface: "slack", UserID: uSmith, ItemID: a, Verb: chat.Approve, Batch: batch}); out.Status != chat.Decided {
		t.Fatalf("an approval of the batch: %+v, want decided", out)
	}
	if _, _, err := chat.CheckBatch(ctx, e.b, smith, []uint64{b, a}); !isProblem(err, chat.BatchDecided, a) {
		t.Fatalf("a batch with a decided item: %v, want problem %d at #%d", err, chat.BatchDecided, a)
	}
}

func isProblem(err error, p chat.BatchProblem, id uint64) bool {
	var br *chat.BatchRefusal
	return errors.As(err, &br) && br.Problem == p && br.ID == id
}
