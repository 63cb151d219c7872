package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
				t.Errorf("the failed write %s was committed, want it absent", k)
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

// TestGroupCommitRerunsOnlyWhatPrecededAFailure checks the contract: a
// failing function is taken out, the functions queued before it run again
// against the same state, the ones after it run once, and the loser's
// error arrives only with the commit.
func TestGroupCommitRerunsOnlyWhatPrecededAFailure(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	// Hold the committer inside a transaction so that the next writes queue
	// up and commit as one group.
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_ = db.Update(ctx, func(tx kv.Tx) error {
			close(started)
			<-release
			return tx.Put("b", []byte("0"), []byte("x"))
		})
	}()
	<-started
	runs := make([]int, 3)
	var mu sync.Mutex
	saw := make([]string, 3)
	fns := []func(kv.Tx) error{
		func(tx kv.Tx) error { // A: writes a
			mu.Lock()
			runs[0]++
			mu.Unlock()
			return tx.Put("b", []byte("a"), []byte("1"))
		},
		func(tx kv.Tx) error { // B: sees a, fails
			v, _ := tx.Get("b", []byte("a"))
			mu.Lock()
			runs[1]++
			saw[1] = string(v)
			mu.Unlock()
			return boom
		},
		func(tx kv.Tx) error { // C: sees a
			v, _ := tx.Get("b", []byte("a"))
			mu.Lock()
			runs[2]++
			saw[2] = string(v)
			mu.Unlock()
			return tx.Put("b", []byte("c"), []byte("1"))
		},
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = db.Update(ctx, fns[i]) }()
		// Queue in order: wait until this one is in the channel.
		for db.group.Queued() != i+1 {
			runtime.Gosched()
		}
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("errors = %v, want nil, boom, nil", errs)
	}
	if runs[0] != 2 || runs[1] != 1 || runs[2] != 1 {
		t.Errorf("runs = %v, want A twice (before the failure), B and C once", runs)
	}
	if saw[1] != "1" || saw[2] != "1" {
		t.Errorf("B and C saw a = %q, %q; want %q for both: both must see A's write", saw[1], saw[2], "1")
	}
}

// TestFailedSyncFailsTheStore checks that a commit that cannot be made
// durable acknowledges nothing, is never retried, and stops the store;
// reopening finds the last good commit and a clean file.
func TestFailedSyncFailsTheStore(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			var fail atomic.Bool
			eio := errors.New("input/output error")
			db, err := Open(path, Options{GroupCommit: group, FailSync: func() error {
				if fail.Load() {
					return eio
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			put := func(k string) func(kv.Tx) error {
				return func(tx kv.Tx) error { return tx.Put("b", []byte(k), []byte("v")) }
			}
			if err := db.Update(ctx, put("good")); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			var runs atomic.Int32
			const n = 20
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = db.Update(ctx, func(tx kv.Tx) error {
						runs.Add(1)
						return put(fmt.Sprint("bad", i))(tx)
					})
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if !errors.Is(err, ErrFailed) {
					t.Errorf("write %d after a failed sync: %v, want ErrFailed", i, err)
				}
			}
			if got := runs.Load(); got > n {
				t.Errorf("functions ran %d times for %d writes, want at most %d: a failed commit was retried", got, n, n)
			}
			fail.Store(false)
			if err := db.Update(ctx, put("later")); !errors.Is(err, ErrFailed) {
				t.Errorf("an update on a failed store: %v, want ErrFailed", err)
			}
			if err := db.View(ctx, func(kv.Tx) error { return nil }); !errors.Is(err, ErrFailed) {
				t.Errorf("a view on a failed store: %v, want ErrFailed", err)
			}
			if err := db.Err(); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), eio.Error()) {
				t.Errorf("Err() = %v, want ErrFailed naming the cause", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := keys(t, db, false, nil, nil); got != "good" {
				t.Errorf("after reopen the store holds %q, want only the acknowledged write", got)
			}
			if err := db.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestGroupCommitPanicReachesItsCaller checks that a panicking function
// panics on its caller's goroutine (where the server recovers it), fails
// alone, and leaves the committer working.
func TestGroupCommitPanicReachesItsCaller(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "g.db"), Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	got := func() (v any) {
		defer func() { v = recover() }()
		_ = db.Update(ctx, func(tx kv.Tx) error {
			_ = tx.Put("b", []byte("p"), []byte("v"))
			panic("bad handler")
		})
		return nil
	}()
	if got != "bad handler" {
		t.Fatalf("recovered %v, want the function's panic", got)
	}
	if err := db.Update(ctx, func(tx kv.Tx) error { return tx.Put("b", []byte("ok"), []byte("v")) }); err != nil {
		t.Fatalf("the committer stopped after a panic: %v", err)
	}
	if k := keys(t, db, false, nil, nil); k != "ok" {
		t.Fatalf("store holds %q, want only the good write", k)
	}
}
