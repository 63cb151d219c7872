package memorytools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
)

// agedMemory plays the seed, confirms #2 (it becomes the current value),
// rejects #3, lets #4 expire, then a year later opens proposal #5.
func agedMemory(t *testing.T, o memory.Options) *fixture {
	f := newFixture(t, o)
	f.seed()
	f.ok(f.member, "confirm_change", arg("memory_id", 2))
	f.ok(f.member, "reject_change", arg("memory_id", 3))
	f.ok(f.fhir, "remember", arg("subject", "code_status", "value", "full code", "source", "fhir")) // #4
	f.text(f.agent, "remember", arg("subject", "code_status", "value", "DNR"), "Stored: [FLAG] code_status = DNR")
	f.advance(48 * time.Hour)
	if rep, err := f.b.Sweep(context.Background(), f.clock()); err != nil || rep["memory"] != 1 {
		t.Fatalf("expiry sweep: %v %v; want memory 1", rep, err)
	}
	f.advance(365 * 24 * time.Hour)
	f.text(f.agent, "remember", arg("subject", "code_status", "value", "DNI"), "Stored: [FLAG] code_status = DNI") // #6, open
	return f
}

func (f *fixture) has(id uint64) bool {
	f.t.Helper()
	_, err := f.call(f.agent, "get_memory", arg("memory_id", id))
	if err == nil {
		return true
	}
	if bot.KindOf(err) != bot.KindNotFound {
		f.t.Fatalf("get_memory #%d: %v, want it found or a KindNotFound error", id, err)
	}
	return false
}

func TestRetentionDeletesClosedProposalsOnly(t *testing.T) {
	t.Parallel()
	f := agedMemory(t, memory.Options{ProposalMaxAge: 24 * time.Hour, ProposalRetention: 30 * 24 * time.Hour})
	ctx := context.Background()
	open := f.ok(f.agent, "pending_changes", arg()).Data.(map[string]any)["changes"].([]pendingData)
	if len(open) != 1 || open[0].MemoryID != 6 {
		t.Fatalf("open proposals before: %+v, want only #6", open)
	}
	historyBefore := f.ok(f.agent, "history", arg("subject", "active_medication")).Text
	if !strings.Contains(historyBefore, "3. warfarin 5mg daily  [HISTORICAL]") {
		t.Fatalf("history before: %s\nwant it to contain %q", historyBefore, "3. warfarin 5mg daily  [HISTORICAL]")
	}

	rep, err := f.b.Sweep(ctx, f.clock())
	if err != nil {
		t.Fatal(err)
	}
	if rep["retention_memory_proposals"] != 2 {
		t.Fatalf("deleted %d, want 2 (#3 rejected, #5 expired): %v", rep["retention_memory_proposals"], rep)
	}
	for id, want := range map[uint64]bool{1: true, 2: true, 3: false, 4: true, 5: false, 6: true} {
		if got := f.has(id); got != want {
			t.Errorf("#%d stored = %v, want %v", id, got, want)
		}
	}
	// The confirmed proposal is the current value and its history stays.
	f.text(f.agent, "history", arg("subject", "active_medication"), "History for 'active_medication' (oldest → newest):\n"+
		"  1. warfarin 5mg daily  [SUPERSEDED]\n  2. apixaban 5mg twice daily  [ACTIVE]")
	f.text(f.agent, "check_before_act", arg("subject", "active_medication"), "✅ SAFE to act on 'active_medication'.\n  current: active_medication = apixaban 5mg twice daily")
	// The open proposal is untouched and still decidable from its item.
	after := f.ok(f.agent, "pending_changes", arg()).Data.(map[string]any)["changes"].([]pendingData)
	if len(after) != 1 || after[0].MemoryID != 6 {
		t.Fatalf("open proposals after: %+v, want only #6", after)
	}
	if it, err := f.b.Items().Get(ctx, after[0].ItemID); err != nil || !it.Pending() {
		t.Fatalf("open item: %+v %v; want it pending", it, err)
	}
	// The deleted proposals' items are gone.
	items := 0
	if err := f.db.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend("items", nil, nil, func(_, _ []byte) error { items++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if items != 2 { // #2's (confirmed) and #6's
		t.Fatalf("%d items left, want 2", items)
	}
	// Audited, and the chain verifies.
	var detail string
	if err := f.db.View(ctx, func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 1000})
		for _, e := range es {
			if e.Action == bot.ActionRetentionPruned {
				detail += e.Detail
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, "deleted 2 memory proposals") || !strings.Contains(detail, "patient_42//#3") || !strings.Contains(detail, "patient_42//#5") {
		t.Fatalf("retention audit: %q, want %q naming %q and %q", detail, "deleted 2 memory proposals", "patient_42//#3", "patient_42//#5")
	}
	if rep, err := approvals.Verify(ctx, f.db, f.b.PublicKey()); err != nil || !rep.Intact {
		t.Fatalf("chain after the sweep: %+v %v; want it intact", rep, err)
	}
	if rep, err := f.b.Sweep(ctx, f.clock()); err != nil || rep["retention_memory_proposals"] != 0 {
		t.Fatalf("second sweep: %v %v; want retention_memory_proposals 0", rep, err)
	}
}

func TestRetentionZeroKeepsClosedProposals(t *testing.T) {
	t.Parallel()
	f := agedMemory(t, memory.Options{ProposalMaxAge: 24 * time.Hour})
	if rep, err := f.b.Sweep(context.Background(), f.clock().Add(100*365*24*time.Hour)); err != nil || rep["retention_memory_proposals"] != 0 {
		t.Fatalf("sweep: %v %v; want retention_memory_proposals 0", rep, err)
	}
	for id := uint64(1); id <= 6; id++ {
		if !f.has(id) {
			t.Errorf("#%d deleted with retention 0, want every fact kept", id)
		}
	}
}

func TestRetentionIndexesProposalsClosedBeforeItExisted(t *testing.T) {
	t.Parallel()
	f := agedMemory(t, memory.Options{ProposalMaxAge: 24 * time.Hour})
	// A store from before the retention index: drop its entries, then turn
	// retention on.
	if err := f.db.Update(context.Background(), func(tx kv.Tx) error {
		var keys [][]byte
		if err := tx.Ascend("mem_closed", nil, nil, func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil }); err != nil {
			return err
		}
		if len(keys) != 2 {
			t.Errorf("%d closed-proposal index entries, want 2", len(keys))
		}
		for _, k := range keys {
			if err := tx.Delete("mem_closed", k); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g := &tools{b: f.b, o: memory.Options{ProposalRetention: 30 * 24 * time.Hour}}
	n, err := g.pruneClosed(context.Background(), f.clock())
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	if f.has(3) || f.has(5) || !f.has(2) || !f.has(6) {
		t.Fatal("the backfilled sweep deleted the wrong facts: want #3 and #5 gone, #2 and #6 kept")
	}
}
