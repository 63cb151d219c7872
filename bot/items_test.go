package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
)

// testSource renders items from a map of statuses kept in the test.
type testSource struct{ status map[string]string }

func (s testSource) View(_ kv.Tx, rec ItemRecord) (Item, error) {
	return Item{Title: "item " + rec.Key, Status: s.status[rec.Key]}, nil
}

func (s testSource) DecisionCall(rec ItemRecord, approve bool, reason string, _ []string) (string, map[string]any, error) {
	return "decide", map[string]any{"key": rec.Key, "approve": approve}, nil
}

func newTestBot(t *testing.T, sinks ...string) *Bot {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b, err := New(Options{Store: db, SigningKey: key, Sinks: sinks, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestItemsOutboxAndOpenIndex(t *testing.T) {
	b := newTestBot(t, "slack", "discord")
	src := testSource{status: map[string]string{"a": "pending", "b": "pending"}}
	b.Items().RegisterKind(KindAction, src)
	ctx := context.Background()
	sys := b.SystemCall(b.Now())
	var ida, idb uint64
	err := b.Update(ctx, sys, func(tx *Tx) error {
		var err error
		if ida, err = tx.NewItem(KindAction, "a", Space{UserID: "u"}, "", time.Time{}); err != nil {
			return err
		}
		idb, err = tx.NewItem(KindAction, "b", Space{UserID: "u"}, "ops", time.Time{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ida != 1 || idb != 2 {
		t.Fatalf("ids %d, %d; want 1, 2", ida, idb)
	}
	for _, sink := range []string{"slack", "discord"} {
		if n, _ := b.Outbox().Depth(ctx, sink); n != 2 {
			t.Fatalf("%s outbox depth %d, want 2 (one created event per item)", sink, n)
		}
	}
	it, err := b.Items().Get(ctx, idb)
	if err != nil || it.Channel != "ops" || it.Title != "item b" || it.Space.UserID != "u" {
		t.Fatalf("item = %+v, %v; want channel %q, title %q, user %q", it, err, "ops", "item b", "u")
	}
	if _, err := b.Items().Get(ctx, 99); !errors.Is(err, ErrNoItem) {
		t.Fatalf("missing item err = %v, want ErrNoItem", err)
	}
	open, _ := b.Items().Pending(ctx, 10)
	if len(open) != 2 || open[0].ID != 1 {
		t.Fatalf("pending = %+v, want items 1 and 2: neither expires, so the older first", open)
	}
	src.status["a"] = "approved"
	if err := b.Update(ctx, sys, func(tx *Tx) error { return tx.Emit(ida, EventDecided, "") }); err != nil {
		t.Fatal(err)
	}
	open, _ = b.Items().Pending(ctx, 10)
	if len(open) != 1 || open[0].ID != 2 {
		t.Fatalf("after deciding item 1, pending = %+v, want only item 2", open)
	}
	// The slack sink delivers in order; a failure stops the pass and is retried later.
	var got []string
	fail := true
	deliver := func(_ context.Context, ev Event) error {
		if ev.Type == EventDecided && fail {
			fail = false
			return &RetryAfterError{After: time.Minute, Err: errors.New("429")}
		}
		got = append(got, ev.Type)
		return nil
	}
	if err := b.Outbox().Drain(ctx, "slack", deliver); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("first pass delivered %v, want the two created events", got)
	}
	if n, _ := b.Outbox().Depth(ctx, "slack"); n != 1 {
		t.Fatalf("depth %d, want the failed event kept", n)
	}
	if err := b.Outbox().Drain(ctx, "slack", deliver); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("the event was retried before its Retry-After: delivered %v, want still only the two created events", got)
	}
}

func TestFirstDeliveryOnceAndPruned(t *testing.T) {
	b := newTestBot(t)
	ctx := context.Background()
	first, err := b.Deliveries().First(ctx, "slack:T1")
	if err != nil || !first {
		t.Fatalf("first = %v, %v; want true", first, err)
	}
	if again, _ := b.Deliveries().First(ctx, "slack:T1"); again {
		t.Fatal("a replayed delivery was reported as first")
	}
	n, err := b.pruneDeliveries(ctx, b.Now().Add(DefaultDeliveryTTL+time.Second))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	if first, _ := b.Deliveries().First(ctx, "slack:T1"); !first {
		t.Fatal("a pruned id is still remembered")
	}
}

func TestEscalationNoteRoundTrip(t *testing.T) {
	cases := []struct{ channel, role, note string }{
		{"oncall", "admin", "channel=oncall role=admin"},
		{"", "admin", "role=admin"},
		{"oncall", "", "channel=oncall"},
		{"", "", ""},
	}
	for _, c := range cases {
		n := EscalationNote(c.channel, c.role)
		if n != c.note {
			t.Errorf("EscalationNote(%q, %q) = %q, want %q", c.channel, c.role, n, c.note)
		}
		ch, role, rest := parseEscalation(n + " after 20m")
		if ch != c.channel || role != c.role || len(rest) != 2 {
			t.Errorf("parseEscalation(%q) = %q, %q, %v; want %q, %q and 2 words left", n, ch, role, rest, c.channel, c.role)
		}
	}
}

func TestOutboxStatsCountsEverySink(t *testing.T) {
	b := newTestBot(t, "slack")
	b.Outbox().TrackSink("callback")
	b.Items().RegisterKind(KindAction, testSource{status: map[string]string{"a": "pending"}})
	ctx := context.Background()
	err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *Tx) error {
		id, err := tx.NewItem(KindAction, "a", Space{}, "", time.Time{})
		if err != nil {
			return err
		}
		if err := tx.EmitTo("callback", id, EventDecided, ""); err != nil {
			return err
		}
		return tx.EmitTo("webhook", id, EventDecided, "")
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Outbox().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for sink, want := range map[string]int{"slack": 1, "callback": 1, "webhook": 1} {
		if st[sink].Depth != want {
			t.Errorf("%s depth %d, want %d (stats %+v)", sink, st[sink].Depth, want, st)
		}
	}
	if err := b.Outbox().Drain(ctx, "callback", func(context.Context, Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	st, _ = b.Outbox().Stats(ctx)
	if d, ok := st["callback"]; !ok || d.Depth != 0 {
		t.Errorf("a tracked sink must report 0 when empty, got %+v (present %v)", d, ok)
	}
}
