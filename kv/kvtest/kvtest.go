// Package kvtest is the kv contract as a test suite, run against every
// engine (adapters/bolt, adapters/postgres) so that the domain can rely on
// the same behaviour from each.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/kv"
)

// Run runs the contract suite. newStore returns a new, empty store for one
// subtest (the caller closes it in t.Cleanup). Stores with group commit and
// without should both pass.
func Run(t *testing.T, newStore func(t *testing.T) kv.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, kv.Store)
	}{
		{"Ordering", testOrdering},
		{"Ranges", testRanges},
		{"Prefix", testPrefix},
		{"LongScans", testLongScans},
		{"GetPutDelete", testGetPutDelete},
		{"ReadYourWrites", testReadYourWrites},
		{"Sequences", testSequences},
		{"RollbackOnError", testRollback},
		{"ReadOnly", testReadOnly},
		{"PreCommit", testPreCommit},
		{"PreCommitError", testPreCommitError},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Rerun", testRerun},
		{"Cancelled", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var ctx = context.Background()

func put(t *testing.T, s kv.Store, bucket string, keys ...[]byte) {
	t.Helper()
	err := s.Update(ctx, func(tx kv.Tx) error {
		for _, k := range keys {
			if err := tx.Put(bucket, k, append([]byte("v:"), k...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// scan returns the keys of a scan, checking that every value is the one put
// stored for its key.
func scan(t *testing.T, s kv.Store, desc bool, bucket string, from, to []byte) [][]byte {
	t.Helper()
	var got [][]byte
	err := s.View(ctx, func(tx kv.Tx) error {
		f := tx.Ascend
		if desc {
			f = tx.Descend
		}
		return f(bucket, from, to, func(k, v []byte) error {
			if !bytes.Equal(v, append([]byte("v:"), k...)) {
				t.Errorf("key %x has value %x", k, v)
			}
			got = append(got, bytes.Clone(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func hexes(keys [][]byte) string {
	var s []string
	for _, k := range keys {
		s = append(s, fmt.Sprintf("%x", k))
	}
	return strings.Join(s, ",")
}

// testOrdering: keys come back in bytewise order (not text collation, not
// by length), both ways, whatever order they were written in.
func testOrdering(t *testing.T, s kv.Store) {
	keys := [][]byte{
		{0x00}, {0x00, 0x00}, {0x01}, {0x7f}, {0x80}, {0xff}, {0xff, 0x00}, {0xff, 0xff},
		[]byte("A"), []byte("B"), []byte("a"), []byte("a\x00b"), []byte("ab"), []byte("b"),
		kv.U64(1), kv.U64(2), kv.U64(255), kv.U64(256), kv.U64(1 << 40),
		[]byte("é"), []byte("z"),
	}
	shuffled := slices.Clone(keys)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	put(t, s, "b", shuffled...)
	put(t, s, "other", []byte("a"), []byte("zz")) // another bucket never shows
	want := slices.Clone(keys)
	slices.SortFunc(want, bytes.Compare)
	want = slices.CompactFunc(want, bytes.Equal)
	if got := scan(t, s, false, "b", nil, nil); hexes(got) != hexes(want) {
		t.Errorf("ascending:\n got %s\nwant %s", hexes(got), hexes(want))
	}
	slices.Reverse(want)
	if got := scan(t, s, true, "b", nil, nil); hexes(got) != hexes(want) {
		t.Errorf("descending:\n got %s\nwant %s", hexes(got), hexes(want))
	}
	if got := scan(t, s, false, "missing", nil, nil); len(got) != 0 {
		t.Errorf("a bucket never written has keys %s", hexes(got))
	}
}

// testRanges: [from, to) in both directions, with bounds on keys, between
// keys and outside them.
func testRanges(t *testing.T, s kv.Store) {
	var ks [][]byte
	for _, k := range []string{"a", "b", "ba", "bb", "c", "d"} {
		ks = append(ks, []byte(k))
	}
	put(t, s, "b", ks...)
	cases := []struct {
		from, to string
		asc      string
	}{
		{"", "", "a,b,ba,bb,c,d"},
		{"b", "c", "b,ba,bb"},
		{"b", "bb", "b,ba"},
		{"b\x00", "bb\x00", "ba,bb"},
		{"", "bb", "a,b,ba"},
		{"c", "zz", "c,d"},
		{"c", "", "c,d"},
		{"0", "a", ""},
		{"e", "", ""},
		{"c", "c", ""},
		{"d", "c", ""}, // from after to: empty, not an error
	}
	for _, c := range cases {
		var from, to []byte
		if c.from != "" {
			from = []byte(c.from)
		}
		if c.to != "" {
			to = []byte(c.to)
		}
		got := func(desc bool) string {
			var s2 []string
			for _, k := range scan(t, s, desc, "b", from, to) {
				s2 = append(s2, string(k))
			}
			return strings.Join(s2, ",")
		}
		if g := got(false); g != c.asc {
			t.Errorf("ascend [%q,%q) = %q, want %q", c.from, c.to, g, c.asc)
		}
		want := strings.Split(c.asc, ",")
		slices.Reverse(want)
		if g := got(true); g != strings.Join(want, ",") {
			t.Errorf("descend [%q,%q) = %q, want %q", c.from, c.to, g, strings.Join(want, ","))
		}
	}
}

// testPrefix: kv.Prefix sees exactly the keys with the prefix, including a
// prefix ending in 0xff and composite kv.Join keys.
func testPrefix(t *testing.T, s kv.Store) {
	keys := [][]byte{
		kv.Join([]byte("alice"), kv.U64(1)), kv.Join([]byte("alice"), kv.U64(2)),
		kv.Join([]byte("alicex"), kv.U64(1)), kv.Join([]byte("al"), kv.U64(1)),
		{0x10, 0xff}, {0x10, 0xff, 0x00}, {0x10, 0xff, 0xff}, {0x11}, {0x10, 0xfe},
	}
	put(t, s, "p", keys...)
	cases := []struct {
		prefix []byte
		want   [][]byte
	}{
		{append([]byte("alice"), 0), [][]byte{keys[0], keys[1]}},
		{[]byte("alice"), [][]byte{keys[0], keys[1], keys[2]}},
		{[]byte{0x10, 0xff}, [][]byte{{0x10, 0xff}, {0x10, 0xff, 0x00}, {0x10, 0xff, 0xff}}},
		{[]byte("nobody"), nil},
	}
	for _, c := range cases {
		var got [][]byte
		err := s.View(ctx, func(tx kv.Tx) error {
			return kv.Prefix(tx, "p", c.prefix, func(k, _ []byte) error { got = append(got, bytes.Clone(k)); return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		if hexes(got) != hexes(c.want) {
			t.Errorf("prefix %x: got %s, want %s", c.prefix, hexes(got), hexes(c.want))
		}
		// The same range backwards.
		rev := slices.Clone(c.want)
		slices.Reverse(rev)
		if g := scan(t, s, true, "p", c.prefix, kv.PrefixEnd(c.prefix)); hexes(g) != hexes(rev) {
			t.Errorf("prefix %x descending: got %s, want %s", c.prefix, hexes(g), hexes(rev))
		}
	}
}

// testLongScans: scans of thousands of keys see each once and in order,
// stop where the callback says, and let the callback read and write in the
// same transaction while the scan runs.
func testLongScans(t *testing.T, s kv.Store) {
	const n = 3000
	err := s.Update(ctx, func(tx kv.Tx) error {
		for i := 1; i <= n; i++ {
			if err := tx.Put("long", kv.U64(uint64(i)), append([]byte("v:"), kv.U64(uint64(i))...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range []bool{false, true} {
		got := scan(t, s, desc, "long", nil, nil)
		if len(got) != n {
			t.Fatalf("desc=%v: %d keys, want %d", desc, len(got), n)
		}
		for i, k := range got {
			want := uint64(i + 1)
			if desc {
				want = uint64(n - i)
			}
			if kv.ParseU64(k) != want {
				t.Fatalf("desc=%v: key %d is %d, want %d", desc, i, kv.ParseU64(k), want)
			}
		}
		// A sub-range that crosses batch boundaries.
		if got := scan(t, s, desc, "long", kv.U64(100), kv.U64(2100)); len(got) != 2000 {
			t.Fatalf("desc=%v: [100,2100) has %d keys", desc, len(got))
		}
	}
	// Stop after 1500, reading and writing other keys meanwhile.
	seen := 0
	err = s.Update(ctx, func(tx kv.Tx) error {
		seen = 0
		return tx.Ascend("long", nil, nil, func(k, v []byte) error {
			seen++
			if _, err := tx.Get("long", kv.U64(uint64(n+1-seen))); err != nil {
				return err
			}
			if err := tx.Put("copy", k, v); err != nil {
				return err
			}
			if seen == 1500 {
				return kv.ErrStop
			}
			return nil
		})
	})
	if err != nil || seen != 1500 {
		t.Fatalf("stopped scan: seen %d, err %v", seen, err)
	}
	if got := scan(t, s, false, "copy", nil, nil); len(got) != 1500 || kv.ParseU64(got[1499]) != 1500 {
		t.Fatalf("copied %d keys", len(got))
	}
	// A callback's own error ends the scan and is returned.
	boom := errors.New("boom")
	err = s.View(ctx, func(tx kv.Tx) error {
		return tx.Descend("long", nil, nil, func(k, _ []byte) error { return boom })
	})
	if !errors.Is(err, boom) {
		t.Fatalf("scan error = %v, want boom", err)
	}
}

func testGetPutDelete(t *testing.T, s kv.Store) {
	var kept []byte
	err := s.Update(ctx, func(tx kv.Tx) error {
		if v, err := tx.Get("none", []byte("k")); err != nil || v != nil {
			return fmt.Errorf("get from a missing bucket = %q, %v", v, err)
		}
		if err := tx.Put("b", []byte("k"), []byte("one")); err != nil {
			return err
		}
		if err := tx.Put("b", []byte("k"), []byte("two")); err != nil {
			return err
		}
		v, err := tx.Get("b", []byte("k"))
		if err != nil || string(v) != "two" {
			return fmt.Errorf("read your write: %q, %v", v, err)
		}
		v[0] = 'X' // a copy: changing it changes nothing stored
		kept = v
		if err := tx.Delete("b", []byte("missing")); err != nil {
			return fmt.Errorf("deleting a missing key: %v", err)
		}
		if err := tx.Delete("none", []byte("missing")); err != nil {
			return fmt.Errorf("deleting in a missing bucket: %v", err)
		}
		return tx.Put("b", []byte("gone"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(tx kv.Tx) error { return tx.Delete("b", []byte("gone")) })
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx kv.Tx) error {
		v, err := tx.Get("b", []byte("k"))
		if err != nil || string(v) != "two" {
			return fmt.Errorf("after commit: %q, %v", v, err)
		}
		if v, _ := tx.Get("b", []byte("gone")); v != nil {
			return fmt.Errorf("a deleted key reads %q", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(kept) != "Xwo" {
		t.Fatalf("a value kept after its transaction changed: %q", kept)
	}
}

// testReadYourWrites: inside one transaction, scans in both directions see
// the transaction's own puts and not its deletes, merged in order with what
// was committed before.
func testReadYourWrites(t *testing.T, s kv.Store) {
	put(t, s, "b", []byte("a"), []byte("c"), []byte("e"))
	err := s.Update(ctx, func(tx kv.Tx) error {
		if err := tx.Put("b", []byte("b"), []byte("v:b")); err != nil {
			return err
		}
		if err := tx.Put("b", []byte("f"), []byte("v:f")); err != nil {
			return err
		}
		if err := tx.Delete("b", []byte("c")); err != nil {
			return err
		}
		if err := tx.Put("b", []byte("e"), []byte("v:e")); err != nil { // overwrite, same value form
			return err
		}
		for _, desc := range []bool{false, true} {
			var got []string
			f := tx.Ascend
			if desc {
				f = tx.Descend
			}
			err := f("b", nil, nil, func(k, v []byte) error {
				if string(v) != "v:"+string(k) {
					return fmt.Errorf("key %q has value %q", k, v)
				}
				got = append(got, string(k))
				return nil
			})
			if err != nil {
				return err
			}
			want := "a,b,e,f"
			if desc {
				want = "f,e,b,a"
			}
			if strings.Join(got, ",") != want {
				return fmt.Errorf("desc=%v: the transaction scans %v, want %s", desc, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testSequences(t *testing.T, s kv.Store) {
	next := func(bucket string) uint64 {
		var n uint64
		err := s.Update(ctx, func(tx kv.Tx) error {
			var err error
			n, err = tx.NextSequence(bucket)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for want := uint64(1); want <= 3; want++ {
		if got := next("a"); got != want {
			t.Fatalf("sequence of a = %d, want %d", got, want)
		}
	}
	if got := next("b"); got != 1 {
		t.Fatalf("each bucket has its own sequence: b starts at %d", got)
	}
	err := s.Update(ctx, func(tx kv.Tx) error {
		n, err := tx.NextSequence("a")
		if err != nil || n != 4 {
			return fmt.Errorf("sequence = %d, %v", n, err)
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the failing update did not fail")
	}
	if got := next("a"); got != 4 {
		t.Fatalf("a rolled-back NextSequence was kept: next is %d, want 4", got)
	}
	err = s.Update(ctx, func(tx kv.Tx) error {
		for want := uint64(5); want <= 7; want++ {
			if n, err := tx.NextSequence("a"); err != nil || n != want {
				return fmt.Errorf("in one transaction: %d, %v; want %d", n, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testRollback(t *testing.T, s kv.Store) {
	put(t, s, "b", []byte("keep"))
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx kv.Tx) error {
		if err := tx.Put("b", []byte("new"), []byte("x")); err != nil {
			return err
		}
		if err := tx.Delete("b", []byte("keep")); err != nil {
			return err
		}
		if err := tx.Put("fresh", []byte("k"), []byte("x")); err != nil {
			return err
		}
		return fmt.Errorf("wrapped: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the function's error", err)
	}
	if got := scan(t, s, false, "b", nil, nil); hexes(got) != hexes([][]byte{[]byte("keep")}) {
		t.Fatalf("after rollback b holds %s", hexes(got))
	}
	if got := scan(t, s, false, "fresh", nil, nil); len(got) != 0 {
		t.Fatal("a rolled-back transaction left a bucket with keys")
	}
}

func testReadOnly(t *testing.T, s kv.Store) {
	err := s.View(ctx, func(tx kv.Tx) error {
		if err := tx.Put("b", []byte("k"), []byte("v")); err == nil {
			return errors.New("put succeeded in a View")
		}
		if _, ok := kv.Finally(tx, "k", func() kv.PreCommit { return &recorder{} }); ok {
			return errors.New("a View accepted a PreCommit")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := scan(t, s, false, "b", nil, nil); len(got) != 0 {
		t.Fatal("a View wrote")
	}
}

// recorder is a PreCommit that writes how many functions registered it.
type recorder struct {
	runs, adds int
	err        error
}

func (r *recorder) BeforeCommit(tx kv.Tx) error {
	r.runs++
	if r.err != nil {
		return r.err
	}
	// It sees the function's writes, and its own write commits with them.
	v, err := tx.Get("b", []byte("fn"))
	if err != nil {
		return err
	}
	return tx.Put("b", []byte("hook"), fmt.Appendf(nil, "runs=%d adds=%d fn=%s", r.runs, r.adds, v))
}

func testPreCommit(t *testing.T, s kv.Store) {
	var hooks []*recorder
	err := s.Update(ctx, func(tx kv.Tx) error {
		hooks = hooks[:0]
		for range 3 {
			p, ok := kv.Finally(tx, "rec", func() kv.PreCommit { return &recorder{} })
			if !ok {
				return errors.New("a read-write transaction cannot defer work")
			}
			r := p.(*recorder)
			r.adds++
			hooks = append(hooks, r)
		}
		return tx.Put("b", []byte("fn"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if hooks[0] != hooks[1] || hooks[1] != hooks[2] {
		t.Fatal("one key registered several hooks")
	}
	err = s.View(ctx, func(tx kv.Tx) error {
		v, err := tx.Get("b", []byte("hook"))
		if err != nil {
			return err
		}
		if string(v) != "runs=1 adds=3 fn=x" {
			return fmt.Errorf("the hook wrote %q, want it run once, after the function", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testPreCommitError(t *testing.T, s kv.Store) {
	boom := errors.New("hook failed")
	err := s.Update(ctx, func(tx kv.Tx) error {
		if _, ok := kv.Finally(tx, "rec", func() kv.PreCommit { return &recorder{err: boom} }); !ok {
			return errors.New("cannot defer")
		}
		return tx.Put("b", []byte("fn"), []byte("x"))
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the hook's", err)
	}
	if got := scan(t, s, false, "b", nil, nil); len(got) != 0 {
		t.Fatal("a transaction whose PreCommit failed committed")
	}
}

// testConcurrentWriters: read-modify-write from many goroutines loses no
// update, and sequences hand out each number once.
func testConcurrentWriters(t *testing.T, s kv.Store) {
	const writers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	seqs := make(chan uint64, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var seq uint64
				err := s.Update(ctx, func(tx kv.Tx) error {
					v, err := tx.Get("c", []byte("counter"))
					if err != nil {
						return err
					}
					if err := tx.Put("c", []byte("counter"), kv.U64(kv.ParseU64(v)+1)); err != nil {
						return err
					}
					if seq, err = tx.NextSequence("c"); err != nil {
						return err
					}
					return tx.Put("log", kv.U64(seq), fmt.Appendf(nil, "%d/%d", w, i))
				})
				if err != nil {
					errs <- err
					continue
				}
				seqs <- seq
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(seqs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[uint64]bool{}
	for n := range seqs {
		if seen[n] {
			t.Errorf("sequence %d handed out twice", n)
		}
		seen[n] = true
	}
	var counter []byte
	rows := 0
	err := s.View(ctx, func(tx kv.Tx) error {
		var err error
		counter, err = tx.Get("c", []byte("counter"))
		if err != nil {
			return err
		}
		return tx.Ascend("log", nil, nil, func(k, _ []byte) error {
			rows++
			if !seen[kv.ParseU64(k)] {
				return fmt.Errorf("log row %d was never acknowledged", kv.ParseU64(k))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if kv.ParseU64(counter) != writers*each || rows != writers*each || len(seen) != writers*each {
		t.Fatalf("counter %d, %d log rows, %d sequences; want %d of each", kv.ParseU64(counter), rows, len(seen), writers*each)
	}
}

// testRerun: whatever an engine does to run functions again (conflicts,
// group commit), what each caller gets back is what its committed run saw:
// each of the concurrent increments returns a distinct value, and together
// they are 1..n. One function fails on purpose; the others are unaffected.
func testRerun(t *testing.T, s kv.Store) {
	const n = 40
	var wg sync.WaitGroup
	got := make([]uint64, n)
	errs := make([]error, n)
	boom := errors.New("boom")
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx kv.Tx) error {
				v, err := tx.Get("r", []byte("n"))
				if err != nil {
					return err
				}
				if i == n/2 {
					return boom
				}
				got[i] = kv.ParseU64(v) + 1 // assigned, not accumulated
				return tx.Put("r", []byte("n"), kv.U64(got[i]))
			})
		}()
	}
	wg.Wait()
	var vals []uint64
	for i, err := range errs {
		if i == n/2 {
			if !errors.Is(err, boom) {
				t.Errorf("the failing function got %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		vals = append(vals, got[i])
	}
	slices.Sort(vals)
	for i, v := range vals {
		if v != uint64(i+1) {
			t.Fatalf("values handed back %v, want 1..%d each once", vals, n-1)
		}
	}
}

func testCancelled(t *testing.T, s kv.Store) {
	c, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	err := s.Update(c, func(tx kv.Tx) error {
		ran = true
		return tx.Put("b", []byte("k"), []byte("v"))
	})
	if err == nil || ran {
		t.Fatalf("update with a cancelled context: err %v, ran %v", err, ran)
	}
	if got := scan(t, s, false, "b", nil, nil); len(got) != 0 {
		t.Fatal("a cancelled update wrote")
	}
}

// Twice returns a Store whose Update runs every function twice: first a
// rehearsal in a transaction that is always rolled back, then for real.
// Engines may re-run a function (kv.Store's contract); Twice makes that
// happen every time, so that a function doing something outside its
// transaction (appending to a caller's slice, sending, counting) does it
// twice and the test of its outcome fails. A function that fails in the
// rehearsal returns that failure, as the engine would.
func Twice(s kv.Store) kv.Store { return twice{s} }

// errRehearsal rolls back the first run of a Twice update.
var errRehearsal = errors.New("kvtest: rehearsal rolled back")

type twice struct{ kv.Store }

func (w twice) Update(ctx context.Context, fn func(kv.Tx) error) error {
	err := w.Store.Update(ctx, func(tx kv.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errRehearsal
	})
	if !errors.Is(err, errRehearsal) {
		return err
	}
	return w.Store.Update(ctx, fn)
}
