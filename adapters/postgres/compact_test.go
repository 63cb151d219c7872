package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/kv"
)

// TestCompactGivesDeletedSpaceBack: after most keys are deleted, a plain
// compact runs while another store reads and writes, and a full one
// shrinks the tables on disk; every key left reads back.
func TestCompactGivesDeletedSpaceBack(t *testing.T) {
	dsn := openDSN(t)
	ctx := context.Background()
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	big := strings.Repeat("x", 2000)
	for batch := range 10 {
		err := db.Update(ctx, func(tx kv.Tx) error {
			for i := range 200 {
				if err := tx.Put("notes", []byte(fmt.Sprintf("k%05d", batch*200+i)), []byte(big)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = db.Update(ctx, func(tx kv.Tx) error {
		for i := range 2000 {
			if i%10 != 0 {
				if err := tx.Delete("notes", []byte(fmt.Sprintf("k%05d", i))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A plain compact while the other store holds a read open and then writes.
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = other.View(ctx, func(tx kv.Tx) error {
			_, _ = tx.Get("notes", []byte("k00000"))
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	plain, err := db.Compact(ctx, false)
	close(release)
	if err != nil || plain.Full || plain.Keys != 200 {
		t.Fatalf("plain compact beside a reader: %+v, %v; want a plain (not full) compaction of 200 keys", plain, err)
	}
	if err := other.Update(ctx, func(tx kv.Tx) error { return tx.Put("notes", []byte("after"), []byte("plain")) }); err != nil {
		t.Fatal(err)
	}
	full, err := db.Compact(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !full.Full || full.Keys != 201 || full.After >= full.Before/2 {
		t.Fatalf("full compact after deleting 90%%: %+v, want the tables less than half their size", full)
	}
	var n int
	err = other.View(ctx, func(tx kv.Tx) error {
		return kv.Prefix(tx, "notes", []byte("k"), func(k, v []byte) error {
			if len(v) != len(big) {
				return fmt.Errorf("%s: %d bytes", k, len(v))
			}
			n++
			return nil
		})
	})
	if err != nil || n != 200 {
		t.Fatalf("after compaction: %d keys, %v; want 200", n, err)
	}
}
