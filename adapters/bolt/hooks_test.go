package bolt

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

// recorder is a PreCommit that records the names its functions gave it and
// how often it ran, and writes them as one value.
type recorder struct {
	mu    *sync.Mutex
	runs  *int
	names []string
	fail  error
}

func (r *recorder) BeforeCommit(tx kv.Tx) error {
	r.mu.Lock()
	*r.runs++
	r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	return tx.Put("hook", []byte("names"), []byte(strings.Join(r.names, ",")))
}

// holdCommitter blocks the committer inside a transaction until release is
// closed, so that the writes queued meanwhile commit as one group.
func holdCommitter(t *testing.T, db *DB) (release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	started := make(chan struct{})
	go func() {
		_ = db.Update(context.Background(), func(tx kv.Tx) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	return release
}

// queueInOrder starts one Update per function and waits until each is in
// the committer's queue before starting the next; it returns their errors
// once all have returned.
func queueInOrder(db *DB, fns []func(kv.Tx) error, release chan struct{}) []error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = db.Update(context.Background(), fns[i]) }()
		for db.group.Queued() != i+1 {
			runtime.Gosched()
		}
	}
	close(release)
	wg.Wait()
	return errs
}

func readHookValue(t *testing.T, db *DB) string {
	t.Helper()
	var v []byte
	if err := db.View(context.Background(), func(tx kv.Tx) error {
		var err error
		v, err = tx.Get("hook", []byte("names"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestPreCommitRunsOncePerGroup: the functions of one group share one
// PreCommit per key, which runs once, after the last of them, and a rerun
// after a failing function starts from a fresh one.
func TestPreCommitRunsOncePerGroup(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		fail     map[int]bool // functions that fail after registering
		wantRuns int
		want     string
	}{
		{"no failure", nil, 1, "A,B,C"},
		{"the middle function fails", map[int]bool{1: true}, 1, "A,C"},
		{"the first and last fail", map[int]bool{0: true, 2: true}, 1, "B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "h.db"), Options{GroupCommit: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var mu sync.Mutex
			runs := 0
			var fns []func(kv.Tx) error
			for i, name := range []string{"A", "B", "C"} {
				fns = append(fns, func(tx kv.Tx) error {
					h, ok := kv.Finally(tx, "test", func() kv.PreCommit { return &recorder{mu: &mu, runs: &runs} })
					if !ok {
						return errors.New("a read-write transaction cannot defer work")
					}
					r := h.(*recorder)
					r.names = append(r.names, name)
					if tt.fail[i] {
						return boom
					}
					return tx.Put("b", []byte(name), []byte("x"))
				})
			}
			release := holdCommitter(t, db)
			errs := queueInOrder(db, fns, release)
			for i, err := range errs {
				if tt.fail[i] != errors.Is(err, boom) || (!tt.fail[i] && err != nil) {
					t.Fatalf("errors = %v, want boom where %v is true and nil elsewhere", errs, tt.fail)
				}
			}
			// A failed attempt's hook never runs; the committed one runs once.
			if runs != tt.wantRuns {
				t.Errorf("the hook ran %d times, want %d", runs, tt.wantRuns)
			}
			if got := readHookValue(t, db); got != tt.want {
				t.Errorf("the hook saw %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPreCommitErrorRollsBackTheGroup: a failing PreCommit fails every
// function of its transaction and commits nothing, but is not a failure of
// the store: the next write commits.
func TestPreCommitErrorRollsBackTheGroup(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "h.db"), Options{GroupCommit: group})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			bad := errors.New("hook refused")
			var mu sync.Mutex
			runs := 0
			fn := func(name string) func(kv.Tx) error {
				return func(tx kv.Tx) error {
					kv.Finally(tx, "test", func() kv.PreCommit { return &recorder{mu: &mu, runs: &runs, fail: bad} })
					return tx.Put("b", []byte(name), []byte("x"))
				}
			}
			var errs []error
			if group {
				errs = queueInOrder(db, []func(kv.Tx) error{fn("A"), fn("B")}, holdCommitter(t, db))
			} else {
				errs = []error{db.Update(context.Background(), fn("A"))}
			}
			for _, err := range errs {
				if !errors.Is(err, bad) {
					t.Fatalf("errors = %v, want the hook's", errs)
				}
			}
			if err := db.Err(); err != nil {
				t.Fatalf("a hook's error failed the store: %v", err)
			}
			if err := db.Update(context.Background(), func(tx kv.Tx) error { return tx.Put("b", []byte("after"), []byte("x")) }); err != nil {
				t.Fatalf("the next write: %v", err)
			}
			var got []string
			_ = db.View(context.Background(), func(tx kv.Tx) error {
				return tx.Ascend("b", nil, nil, func(k, _ []byte) error { got = append(got, string(k)); return nil })
			})
			if fmt.Sprint(got) != "[after]" {
				t.Fatalf("committed keys = %v, want only [after]", got)
			}
		})
	}
}

// TestPreCommitPanicIsAnError: a PreCommit that panics fails its
// transaction with an error instead of killing the committer.
func TestPreCommitPanicIsAnError(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "h.db"), Options{GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(context.Background(), func(tx kv.Tx) error {
		kv.Finally(tx, "p", func() kv.PreCommit { return panicHook{} })
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "pre-commit hook panicked") {
		t.Fatalf("err = %v, want one saying %q", err, "pre-commit hook panicked")
	}
	if err := db.Update(context.Background(), func(tx kv.Tx) error { return tx.Put("b", []byte("k"), nil) }); err != nil {
		t.Fatalf("the committer did not survive: %v", err)
	}
}

type panicHook struct{}

func (panicHook) BeforeCommit(kv.Tx) error { panic("boom") }

func TestReadOnlyTransactionCannotDeferWork(t *testing.T) {
	db := open(t)
	err := db.View(context.Background(), func(tx kv.Tx) error {
		if _, ok := kv.Finally(tx, "x", func() kv.PreCommit { return panicHook{} }); ok {
			t.Error("a read-only transaction accepted a PreCommit")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAuditChainUnderGroupCommit appends through a group commit in which
// functions append one or several entries, one fails after appending, and
// the group is re-run without it: the committed chain holds exactly the
// successful functions' entries, each signed, linked in order, and the head
// is signed over the newest.
func TestAuditChainUnderGroupCommit(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	boom := errors.New("boom")
	at := time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC)
	appendAs := func(tx kv.Tx, detail string) error {
		_, err := approvals.Append(tx, key, at, approvals.Entry{Principal: "t [p]", UserID: "u", Action: "test", Detail: detail})
		return err
	}
	tests := []struct {
		name  string
		fails map[int]bool
	}{
		{"one group, all succeed", nil},
		{"one function fails after appending", map[int]bool{3: true}},
		{"the first and the last fail", map[int]bool{0: true, 7: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "a.db"), Options{GroupCommit: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// An entry committed before the group: the group links to it.
			if err := db.Update(context.Background(), func(tx kv.Tx) error { return appendAs(tx, "before") }); err != nil {
				t.Fatal(err)
			}
			const n = 8
			var fns []func(kv.Tx) error
			var want []string
			want = append(want, "before")
			for i := 0; i < n; i++ {
				per := 1 + i%3 // one to three entries per function
				for j := 0; j < per && !tt.fails[i]; j++ {
					want = append(want, fmt.Sprintf("f%d.%d", i, j))
				}
				fns = append(fns, func(tx kv.Tx) error {
					for j := 0; j < per; j++ {
						if err := appendAs(tx, fmt.Sprintf("f%d.%d", i, j)); err != nil {
							return err
						}
					}
					if tt.fails[i] {
						return boom
					}
					return nil
				})
			}
			errs := queueInOrder(db, fns, holdCommitter(t, db))
			for i, err := range errs {
				if tt.fails[i] != (err != nil) {
					t.Fatalf("errors = %v, want an error where %v is true and nil elsewhere", errs, tt.fails)
				}
			}
			rep, err := approvals.Verify(context.Background(), db, pub)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Intact || rep.Entries != len(want) || rep.Head.Seq != uint64(len(want)) {
				t.Fatalf("report = %+v, want %d entries intact", rep, len(want))
			}
			var got []string
			_ = db.View(context.Background(), func(tx kv.Tx) error {
				es, err := approvals.List(tx, approvals.Filter{Limit: 100})
				for i := len(es) - 1; i >= 0; i-- {
					if es[i].ComputeHash() != es[i].Hash {
						t.Errorf("entry %d: its hash does not follow from its content", es[i].Seq)
					}
					got = append(got, es[i].Detail)
				}
				return err
			})
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("chain = %v\nwant    %v", got, want)
			}
		})
	}
}
