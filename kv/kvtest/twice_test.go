package kvtest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/kv/kvtest"
)

// TestTwiceShowsSideEffects: under Twice a function that keeps something
// outside its transaction (here, appends to the caller's slice) does it
// twice, while what it wrote in the transaction is written once.
func TestTwiceShowsSideEffects(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := kvtest.Twice(db)
	var sent []string // a side effect outside the transaction
	var last uint64   // a result assigned, as the contract asks
	err = s.Update(context.Background(), func(tx kv.Tx) error {
		v, err := tx.Get("b", []byte("n"))
		if err != nil {
			return err
		}
		last = kv.ParseU64(v) + 1
		sent = append(sent, "notified")
		return tx.Put("b", []byte("n"), kv.U64(last))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("the side effect ran %d times under Twice, want 2 (the rehearsal and the real run)", len(sent))
	}
	if last != 1 {
		t.Fatalf("assigned result %d, want 1: the rehearsal must leave nothing behind", last)
	}
	var stored []byte
	if err := s.View(context.Background(), func(tx kv.Tx) error {
		stored, err = tx.Get("b", []byte("n"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if kv.ParseU64(stored) != 1 {
		t.Fatalf("stored %d, want 1", kv.ParseU64(stored))
	}
}
