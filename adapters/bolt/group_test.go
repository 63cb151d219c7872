package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/countersign/countersign/kv"
)

func TestGroupCommitIsolatesAFailingFunction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db, err := Open(path, Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	boom := errors.New("boom")
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Update(ctx, func(tx kv.Tx) error {
				if err := tx.Put("b", []byte(fmt.Sprintf("k%03d", i)), []byte("v")); err != nil {
					return err
				}
				if i%7 == 0 {
					return boom
				}
				_, err := tx.NextSequence("seq")
				return err
			})
		}()
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		if i%7 == 0 {
			if !errors.Is(err, boom) {
				t.Errorf("write %d: err = %v, want boom", i, err)
			}
			continue
		}
		want++
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: what was acknowledged is on disk, what failed is not.
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := 0
	var seq uint64
	_ = db.View(ctx, func(tx kv.Tx) error {
		_ = tx.Ascend("b", nil, nil, func(k, _ []byte) error {
			var i int
			fmt.Sscanf(string(k), "k%03d", &i)
			if i%7 == 0 {
				t.Errorf("the failed write %s was committed", k)
			}
			got++
			return nil
		})
		return nil
	})
	_ = db.Update(ctx, func(tx kv.Tx) error { seq, _ = tx.NextSequence("seq"); return nil })
	if got != want || seq != uint64(want)+1 {
		t.Fatalf("committed %d writes and sequence %d, want %d and %d", got, seq, want, want+1)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestGroupCommitAfterCloseFails(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := db.Update(context.Background(), func(kv.Tx) error { return nil }); err == nil {
		t.Fatal("an update after Close succeeded")
	}
}
