package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
	bbolt "go.etcd.io/bbolt"
)

func open(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "t.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Errorf("consistency check: %v", err)
		}
		db.Close()
	})
	return db
}

func keys(t *testing.T, db *DB, desc bool, from, to []byte) string {
	t.Helper()
	var got []string
	err := db.View(context.Background(), func(tx kv.Tx) error {
		f := tx.Ascend
		if desc {
			f = tx.Descend
		}
		return f("b", from, to, func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, ",")
}

func TestRangesAndPrefixes(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	err := db.Update(ctx, func(tx kv.Tx) error {
		for _, k := range []string{"a", "b", "ba", "bb", "c", "d"} {
			if err := tx.Put("b", []byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		desc     bool
		from, to string
		want     string
	}{
		{false, "", "", "a,b,ba,bb,c,d"},
		{true, "", "", "d,c,bb,ba,b,a"},
		{false, "b", "c", "b,ba,bb"},
		{true, "b", "c", "bb,ba,b"},
		{true, "", "bb", "ba,b,a"},
		{true, "c", "zz", "d,c"},
		{false, "e", "", ""},
	}
	for _, c := range cases {
		var from, to []byte
		if c.from != "" {
			from = []byte(c.from)
		}
		if c.to != "" {
			to = []byte(c.to)
		}
		if got := keys(t, db, c.desc, from, to); got != c.want {
			t.Errorf("desc=%v [%q,%q) = %q, want %q", c.desc, c.from, c.to, got, c.want)
		}
	}
	var pre []string
	_ = db.View(ctx, func(tx kv.Tx) error {
		return kv.Prefix(tx, "b", []byte("b"), func(k, _ []byte) error { pre = append(pre, string(k)); return nil })
	})
	if strings.Join(pre, ",") != "b,ba,bb" {
		t.Errorf("prefix b = %v, want [b ba bb]", pre)
	}
}

func TestStopMissingBucketAndCopies(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	var got []byte
	err := db.Update(ctx, func(tx kv.Tx) error {
		if v, err := tx.Get("none", []byte("k")); err != nil || v != nil {
			t.Fatalf("get from a missing bucket = %q, %v; want nil, no error", v, err)
		}
		if err := tx.Put("b", []byte("k"), []byte("value")); err != nil {
			return err
		}
		n, err := tx.NextSequence("b")
		if err != nil || n != 1 {
			t.Fatalf("first sequence = %d, %v; want 1", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(ctx, func(tx kv.Tx) error {
		got, _ = tx.Get("b", []byte("k"))
		calls := 0
		_ = tx.Ascend("b", nil, nil, func(_, _ []byte) error { calls++; return kv.ErrStop })
		if calls != 1 {
			t.Errorf("ErrStop did not stop the scan: %d calls, want 1", calls)
		}
		return nil
	})
	if string(got) != "value" { // still valid after the transaction: a copy
		t.Fatalf("value after tx = %q, want %q", got, "value")
	}
	boom := errors.New("boom")
	err = db.Update(ctx, func(tx kv.Tx) error {
		_ = tx.Put("b", []byte("k2"), []byte("x"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	_ = db.View(ctx, func(tx kv.Tx) error {
		if v, _ := tx.Get("b", []byte("k2")); v != nil {
			t.Error("a failed transaction was committed")
		}
		return nil
	})
}

func TestSecondOpenFailsWithLockError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "countersign server running") {
		t.Fatalf("second open: %v, want ErrLocked with a hint", err)
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := map[string]string{"a": "b", "a\xff": "b", "\xff\xff": ""}
	for in, want := range cases {
		if got := string(kv.PrefixEnd([]byte(in))); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSequentialBucketsFillTheirPages: keys appended in order fill the
// pages of a Sequential bucket to about SequentialFill, and half of them in
// any other bucket; the data read back is the same.
func TestSequentialBucketsFillTheirPages(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{GroupCommit: true, Sequential: []string{"seq"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	val := bytes.Repeat([]byte("v"), 200)
	for i := 0; i < 40; i++ { // many commits, as an append-only log grows
		err := db.Update(ctx, func(tx kv.Tx) error {
			for j := 0; j < 50; j++ {
				for _, b := range []string{"seq", "plain"} {
					n, err := tx.NextSequence(b)
					if err != nil {
						return err
					}
					if err := tx.Put(b, kv.U64(n), val); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pages := map[string]int{}
	err = db.db.View(func(t *bbolt.Tx) error {
		for _, b := range []string{"seq", "plain"} {
			pages[b] = t.Bucket([]byte(b)).Stats().LeafPageN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages["seq"]*10 > pages["plain"]*6 {
		t.Fatalf("leaf pages: sequential %d, plain %d; want the sequential bucket at most 60%% of the plain one", pages["seq"], pages["plain"])
	}
	n := 0
	_ = db.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend("seq", nil, nil, func(k, v []byte) error {
			n++
			if kv.ParseU64(k) != uint64(n) || !bytes.Equal(v, val) {
				t.Fatalf("row %d: key %x, want key %d and the value written", n, k, n)
			}
			return nil
		})
	})
	if n != 2000 {
		t.Fatalf("%d rows, want 2000", n)
	}
}

// TestFreelistModesOpenEachOther: a file written with the freelist synced
// opens without it and back, with every write there and a clean check.
func TestFreelistModesOpenEachOther(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	ctx := context.Background()
	want := 0
	for i, noSync := range []bool{false, true, false, true} {
		db, err := Open(path, Options{NoFreelistSync: noSync})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(ctx, func(tx kv.Tx) error {
			for j := 0; j < 300; j++ {
				if err := tx.Put("b", []byte(fmt.Sprintf("k%d-%03d", i, j)), bytes.Repeat([]byte{'x'}, 100)); err != nil {
					return err
				}
			}
			// Free some pages, so that the freelist is not empty.
			for j := 0; j < 300; j += 2 {
				if err := tx.Delete("b", []byte(fmt.Sprintf("k%d-%03d", i, j))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want += 150
		n := 0
		_ = db.View(ctx, func(tx kv.Tx) error {
			return tx.Ascend("b", nil, nil, func(_, _ []byte) error { n++; return nil })
		})
		if n != want {
			t.Fatalf("open %d (no freelist sync %v): %d keys, want %d", i, noSync, n, want)
		}
		if err := db.Check(); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
