package kv_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
)

func openBolt(t *testing.T, name string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), name), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestCopy: every key of every bucket arrives, across more than one batch,
// with the sequences, so the copy numbers on where the original left off;
// a target that holds anything is refused before a write.
func TestCopy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	from, to := openBolt(t, "from.db"), openBolt(t, "to.db")
	const many = kv.CopyBatch*2 + 7
	err := from.Update(ctx, func(tx kv.Tx) error {
		for i := range many {
			if err := tx.Put("audit", kv.U64(uint64(i)), fmt.Appendf(nil, "entry %d", i)); err != nil {
				return err
			}
		}
		for range 3 {
			if _, err := tx.NextSequence("items"); err != nil {
				return err
			}
		}
		return tx.Put("items", []byte("a"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kv.Copy(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if want := (kv.CopyReport{Buckets: 2, Keys: many + 1}); rep != want {
		t.Errorf("report = %+v, want %+v", rep, want)
	}
	err = to.View(ctx, func(tx kv.Tx) error {
		n := 0
		if err := tx.Ascend("audit", nil, nil, func(k, v []byte) error {
			if want := fmt.Sprintf("entry %d", kv.ParseU64(k)); string(v) != want {
				return fmt.Errorf("key %d = %q, want %q", kv.ParseU64(k), v, want)
			}
			n++
			return nil
		}); err != nil {
			return err
		}
		if n != many {
			return fmt.Errorf("audit holds %d keys after the copy, want %d", n, many)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	var next uint64
	if err := to.Update(ctx, func(tx kv.Tx) (err error) { next, err = tx.NextSequence("items"); return err }); err != nil {
		t.Fatal(err)
	}
	if next != 4 {
		t.Errorf("the copy's next items sequence = %d, want 4 (the original handed out 3)", next)
	}

	// The target is no longer empty: a second copy is refused, and writes nothing.
	_, err = kv.Copy(ctx, from, to)
	var ne *kv.NotEmptyError
	if !errors.As(err, &ne) || ne.Buckets != 2 {
		t.Fatalf("copy into a store that holds 2 buckets: err = %v, want a *kv.NotEmptyError of 2 buckets", err)
	}
}
