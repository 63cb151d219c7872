package postgres

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"github.com/countersign/countersign/kv"
)

// TestReadsAnsweredFromTheTransaction: a key read twice, a key inside a
// range scanned whole and a prefetched key or sequence are answered
// without a round trip, and always as the transaction sees them: after
// its own puts and deletes, before and after a scan sends them.
func TestReadsAnsweredFromTheTransaction(t *testing.T) {
	// One connection, whose statements are prepared by a first
	// transaction of the same shapes, so that what is counted below is
	// the transaction's own round trips.
	db := open(t, Options{MaxConns: 1, Prefetch: Prefetch{Keys: []Key{{Bucket: "head", Key: []byte("h")}}, Sequences: []string{"log"}}})
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error {
		if _, err := tx.Get("w", []byte("k")); err != nil {
			return err
		}
		if _, err := tx.NextSequence("w"); err != nil {
			return err
		}
		if err := tx.Put("w", []byte("k"), []byte("v")); err != nil {
			return err
		}
		if err := tx.Delete("w", []byte("j")); err != nil {
			return err
		}
		return tx.Ascend("w", []byte("a"), []byte("z"), func(k, v []byte) error { return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		for _, k := range []string{"a1", "a2", "b1"} {
			if err := tx.Put("b", []byte(k), []byte("old-"+k)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// trips runs fn and returns the round trips it cost.
	trips := func(fn func() error) uint64 {
		t.Helper()
		before := db.Stats()
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		return db.Stats().Sub(before).RoundTrips
	}
	get := func(tx kv.Tx, key, want string) func() error {
		return func() error {
			v, err := tx.Get("b", []byte(key))
			if err != nil {
				return err
			}
			if want == "" && v != nil || want != "" && string(v) != want {
				t.Errorf("Get %s = %q, want %q", key, v, want)
			}
			return nil
		}
	}
	scan := func(tx kv.Tx, from, to, want string) func() error {
		return func() error {
			var got []string
			var hi []byte // "": to the end
			if to != "" {
				hi = []byte(to)
			}
			err := tx.Ascend("b", []byte(from), hi, func(k, v []byte) error {
				got = append(got, string(k)+"="+string(v))
				return nil
			})
			if s := join(got); s != want {
				t.Errorf("Ascend [%s, %s) = %s, want %s", from, to, s, want)
			}
			return err
		}
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		if n := trips(get(tx, "a1", "old-a1")); n != 1 {
			t.Errorf("first Get: %d round trips, want 1 (with the BEGIN)", n)
		}
		if n := trips(get(tx, "a1", "old-a1")); n != 0 {
			t.Errorf("the same Get again: %d round trips, want 0", n)
		}
		if err := tx.Put("b", []byte("a1"), []byte("new-a1")); err != nil {
			return err
		}
		if n := trips(get(tx, "a1", "new-a1")); n != 0 {
			t.Errorf("Get of a put key: %d round trips, want 0", n)
		}
		if err := tx.Delete("b", []byte("a2")); err != nil {
			return err
		}
		// The scan sends the puts and deletes first (one round trip), then
		// reads the range (one more).
		if n := trips(scan(tx, "a", "b", "a1=new-a1")); n != 2 {
			t.Errorf("scan after writes: %d round trips, want 2", n)
		}
		for _, c := range []struct{ key, want string }{{"a1", "new-a1"}, {"a2", ""}, {"a3", ""}} {
			if n := trips(get(tx, c.key, c.want)); n != 0 {
				t.Errorf("Get %s inside the range scanned whole: %d round trips, want 0", c.key, n)
			}
		}
		if n := trips(get(tx, "b1", "old-b1")); n != 1 {
			t.Errorf("Get outside the scanned range: %d round trips, want 1", n)
		}
		// A put after the scan wins over what the scan saw, and a second
		// scan sends it and sees it.
		if err := tx.Put("b", []byte("a2"), []byte("again-a2")); err != nil {
			return err
		}
		if n := trips(get(tx, "a2", "again-a2")); n != 0 {
			t.Errorf("Get of a key put after the scan: %d round trips, want 0", n)
		}
		if n := trips(scan(tx, "a", "b", "a1=new-a1 a2=again-a2")); n == 0 {
			t.Error("a scan of a bucket with buffered writes cost no round trip")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// What the transaction wrote is what the next one reads.
	if err := db.View(ctx, func(tx kv.Tx) error {
		return scan(tx, "", "", "a1=new-a1 a2=again-a2 b1=old-b1")()
	}); err != nil {
		t.Fatal(err)
	}

	// Prefetched: the head key and the log sequence come with the BEGIN.
	for round, want := range []string{"", "head-1"} {
		if err := db.Update(ctx, func(tx kv.Tx) error {
			var v []byte
			if n := trips(func() (err error) { v, err = tx.Get("head", []byte("h")); return err }); n != 1 {
				t.Errorf("round %d: the prefetched Get cost %d round trips, want 1 (the BEGIN and the prefetch)", round, n)
			}
			if want == "" && v != nil || want != "" && string(v) != want {
				t.Errorf("round %d: prefetched head = %q, want %q", round, v, want)
			}
			var seq uint64
			if n := trips(func() (err error) { seq, err = tx.NextSequence("log"); return err }); n != 0 {
				t.Errorf("round %d: the prefetched sequence cost %d round trips, want 0", round, n)
			}
			if seq != uint64(round+1) {
				t.Errorf("round %d: NextSequence = %d, want %d", round, seq, round+1)
			}
			if err := tx.Put("head", []byte("h"), []byte("head-1")); err != nil {
				return err
			}
			v, err := tx.Get("head", []byte("h"))
			if err != nil {
				return err
			}
			if !bytes.Equal(v, []byte("head-1")) {
				t.Errorf("round %d: head after its put = %q, want head-1", round, v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A write transaction that reads nothing is one round trip: BEGIN, the
	// writer's lock, the writes and COMMIT together.
	if n := trips(func() error {
		return db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", []byte("c1"), []byte("x")) })
	}); n != 1 {
		t.Errorf("a blind write cost %d round trips, want 1", n)
	}
}

func join(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(x)
	}
	return b.String()
}

// TestWritersNeverConflict: the writer's lock is granted before the
// transaction's snapshot is taken, so writers of two replicas that all
// read and move one key (as every write moves the audit chain's head)
// never fail to serialize: with a single attempt allowed, every increment
// commits and none is lost.
func TestWritersNeverConflict(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var dbs [2]*DB
	for i := range dbs {
		db, err := Open(ctx, dsn, Options{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
	}
	const writers, each = 8, 15
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				errs <- dbs[w%2].Update(ctx, func(tx kv.Tx) error {
					v, err := tx.Get("c", []byte("n"))
					if err != nil {
						return err
					}
					return tx.Put("c", []byte("n"), kv.U64(kv.ParseU64(v)+1))
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("an increment failed with one attempt allowed: %v", err)
		}
	}
	var n uint64
	if err := dbs[0].View(ctx, func(tx kv.Tx) error {
		v, err := tx.Get("c", []byte("n"))
		n = kv.ParseU64(v)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Errorf("counter = %d, want %d", n, writers*each)
	}
}
