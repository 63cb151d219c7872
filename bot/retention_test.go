package bot

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/kv"
)

func TestDeliveriesPrunedAfterTheirTTLInBatches(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clk := bottest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	b, err := New(Options{Store: db, SigningKey: ed25519.NewKeyFromSeed(make([]byte, 32)), Now: clk.Now, DeliveryTTL: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Ids recorded before the time index existed: written raw.
	if err := db.Update(ctx, func(tx kv.Tx) error {
		for i := range 10 {
			if err := tx.Put(bucketDeliveries, []byte{'o', byte('0' + i)}, kv.U64(uint64(clk.Now().Unix()))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := RetentionBatch + 3
	for i := range n {
		if first, err := b.Deliveries().First(ctx, "slack:"+string(rune(0x100+i))); err != nil || !first {
			t.Fatalf("delivery %d: first = %v, %v; want true", i, first, err)
		}
	}
	clk.Advance(24 * time.Hour)
	if first, _ := b.Deliveries().First(ctx, "slack:fresh"); !first {
		t.Fatal("fresh id seen before")
	}
	rep, err := b.Sweep(ctx, clk.Now())
	if err != nil || rep["deliveries"] != 0 {
		t.Fatalf("sweep within the TTL: %v %v; want 0 deliveries", rep, err)
	}
	clk.Advance(24*time.Hour + time.Second)
	rep, err = b.Sweep(ctx, clk.Now())
	if err != nil || rep["deliveries"] != n+10 {
		t.Fatalf("sweep after the TTL: %v %v, want %d", rep, err, n+10)
	}
	if again, _ := b.Deliveries().First(ctx, "slack:fresh"); again {
		t.Fatal("the fresh id was pruned with the old ones")
	}
	if first, _ := b.Deliveries().First(ctx, "slack:"+string(rune(0x100))); !first {
		t.Fatal("a pruned id is still remembered")
	}
	left := 0
	if err := db.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend(bucketDeliveriesAt, nil, kv.U64(1<<62), func(_, _ []byte) error { left++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if left != 2 { // slack:fresh and the re-recorded id
		t.Fatalf("%d index entries left, want 2", left)
	}
}

func TestExpiryIndexKeepsARewrittenRecord(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	x := ExpiryIndex{Bucket: "recs", Index: "recs_at", Written: func(v []byte) (time.Time, bool) {
		return time.Unix(int64(kv.ParseU64(v)), 0), len(v) == 8
	}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(at time.Time) {
		if err := db.Update(context.Background(), func(tx kv.Tx) error {
			if err := tx.Put("recs", []byte("k"), kv.U64(uint64(at.Unix()))); err != nil {
				return err
			}
			return x.Add(tx, at, []byte("k"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(t0)
	put(t0.Add(10 * time.Hour)) // rewritten: its old entry must not expire it
	n, err := PruneExpired(context.Background(), db, x, t0.Add(12*time.Hour), 5*time.Hour)
	if err != nil || n != 0 {
		t.Fatalf("pruned %d, %v; want 0: a record rewritten 2h ago expired", n, err)
	}
	n, err = PruneExpired(context.Background(), db, x, t0.Add(16*time.Hour), 5*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the record gone 6h after its last write", n, err)
	}
}
