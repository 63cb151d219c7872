package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/kv"
)

// fill writes n keys of 1 KiB to bucket "b" (and the sequence of "s"),
// then deletes every key but one in ten: most pages become free.
func fillAndDelete(t *testing.T, path string, n int) {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	val := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < n; i += 500 {
		if err := db.Update(ctx, func(tx kv.Tx) error {
			for j := i; j < min(i+500, n); j++ {
				if err := tx.Put("b", kv.U64(uint64(j)), val); err != nil {
					return err
				}
			}
			_, err := tx.NextSequence("s")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		for j := range n {
			if j%10 != 0 {
				if err := tx.Delete("b", kv.U64(uint64(j))); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCompactReclaimsFreePagesAndKeepsEveryKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cs.db")
	const n = 20000
	fillAndDelete(t, path, n)
	rep, err := Compact(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Before <= 0 || rep.After <= 0 || rep.After*3 > rep.Before {
		t.Fatalf("sizes %d -> %d: less than a third expected after deleting 90%%", rep.Before, rep.After)
	}
	if st, _ := os.Stat(path); st.Size() != rep.After {
		t.Fatalf("reported %d, want the file's size %d", rep.After, st.Size())
	}
	if rep.Keys != n/10 || rep.Buckets != 2 { // b's keys; s holds only a sequence
		t.Fatalf("report = %+v, want %d keys and 2 buckets", rep, n/10)
	}
	// Nothing else left in the directory: the temporary file is now the store.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory after compaction: %v, want the store only", ents)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Fatalf("the compacted file: %v", err)
	}
	got := 0
	err = db.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("b", nil, nil, func(k, v []byte) error {
			if kv.ParseU64(k)%10 != 0 || len(v) != 1024 {
				return fmt.Errorf("unexpected key %d (%d bytes)", kv.ParseU64(k), len(v))
			}
			got++
			return nil
		})
	})
	if err != nil || got != n/10 {
		t.Fatalf("%d keys after compaction, want %d: %v", got, n/10, err)
	}
	// Sequences survive: the next number follows the last one issued.
	var seq uint64
	if err := db.Update(context.Background(), func(tx kv.Tx) error {
		var err error
		seq, err = tx.NextSequence("s")
		return err
	}); err != nil || seq != n/500+1 {
		t.Fatalf("sequence after compaction %d, want %d: %v", seq, n/500+1, err)
	}
}

func TestCompactRefusesAStoreInUse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cs.db")
	fillAndDelete(t, path, 2000)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	held, err := Open(path, Options{}) // as a running server does
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = Compact(path, 50e6)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "stop the server") {
		t.Fatalf("compact of a held store: %v, want ErrLocked saying %q", err, "stop the server")
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("the held store was changed")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v, want the store only", ents)
	}
}
