package kv

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// memTx is a Tx on a map that an Attempt commits or throws away. Only Get
// and Put are used by these tests.
type memTx struct{ writes map[string]string }

func (x *memTx) Get(bucket string, key []byte) ([]byte, error) {
	if v, ok := x.writes[bucket+"/"+string(key)]; ok {
		return []byte(v), nil
	}
	return nil, nil
}
func (x *memTx) Put(bucket string, key, value []byte) error {
	x.writes[bucket+"/"+string(key)] = string(value)
	return nil
}
func (x *memTx) Delete(string, []byte) error         { return errors.New("unused") }
func (x *memTx) NextSequence(string) (uint64, error) { return 0, errors.New("unused") }
func (x *memTx) Ascend(string, []byte, []byte, func(k, v []byte) error) error {
	return errors.New("unused")
}
func (x *memTx) Descend(string, []byte, []byte, func(k, v []byte) error) error {
	return errors.New("unused")
}

// memEngine is a fake engine: each attempt starts from the committed state,
// a transaction whose run succeeds is committed unless commitErr is set,
// and a run that fails with errConflict (a serialization failure) is run
// again in a new transaction, as PostgreSQL's engine does.
type memEngine struct {
	mu        sync.Mutex
	committed map[string]string
	attempts  int
	commits   int
	commitErr error
	// hold, when set, blocks the first attempt until it is closed.
	hold chan struct{}
}

var errConflict = errors.New("fake: serialization failure")

func (e *memEngine) attempt(run func(Tx) error) error {
	for {
		e.mu.Lock()
		e.attempts++
		hold := e.hold
		e.hold = nil
		x := &memTx{writes: map[string]string{}}
		for k, v := range e.committed {
			x.writes[k] = v
		}
		e.mu.Unlock()
		if hold != nil {
			<-hold
		}
		err := run(x)
		e.mu.Lock()
		if errors.Is(err, errConflict) {
			e.mu.Unlock()
			continue // the engine runs the whole group again
		}
		if err == nil {
			err = e.commitErr
		}
		if err == nil {
			e.committed = x.writes
			e.commits++
		}
		e.mu.Unlock()
		return err
	}
}

// group queues fns in order behind a held first write, so that they commit
// as one group, and returns the holding write's error and each caller's.
func group(e *memEngine, engineErr func(error) bool, fns ...func(Tx) error) (errs []error, holding error) {
	release := make(chan struct{})
	e.hold = release
	c := NewCommitter(e.attempt, engineErr)
	defer c.Close()
	first := make(chan error, 1)
	go func() { first <- c.Update(context.Background(), func(Tx) error { return nil }) }()
	for c.Queued() != 0 || heldAttempts(e) == 0 {
		runtime.Gosched()
	}
	errs = make([]error, len(fns))
	var wg sync.WaitGroup
	for i := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Update(context.Background(), fns[i]) }()
		for c.Queued() != i+1 {
			runtime.Gosched()
		}
	}
	close(release)
	wg.Wait()
	return errs, <-first
}

func heldAttempts(e *memEngine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attempts
}

// counter counts how often each function of a test ran.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counter) ran(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[name]++
}

func (c *counter) n(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[name]
}

// TestCommitterIsolatesFailuresAndReruns checks the contract on one group
// of five: A writes, B fails, C reads A's write, D fails, E writes. The
// failing functions are taken out one round at a time; what ran before a
// failure runs again; each caller gets its own error; what succeeded is
// committed in one transaction and what failed is not.
func TestCommitterIsolatesFailuresAndReruns(t *testing.T) {
	t.Parallel()
	e := &memEngine{committed: map[string]string{}}
	var runs counter
	errB, errD := errors.New("B failed"), errors.New("D failed")
	var sawC string
	errs, first := group(e, nil,
		func(tx Tx) error { runs.ran("A"); return tx.Put("b", []byte("a"), []byte("1")) },
		func(tx Tx) error {
			runs.ran("B")
			if err := tx.Put("b", []byte("b"), []byte("1")); err != nil {
				return err
			}
			return errB
		},
		func(tx Tx) error {
			runs.ran("C")
			v, _ := tx.Get("b", []byte("a"))
			sawC = string(v) // assigned, not accumulated
			return tx.Put("b", []byte("c"), v)
		},
		func(tx Tx) error { runs.ran("D"); return errD },
		func(tx Tx) error { runs.ran("E"); return tx.Put("b", []byte("e"), []byte("1")) },
	)
	if first != nil || errs[0] != nil || !errors.Is(errs[1], errB) || errs[2] != nil || !errors.Is(errs[3], errD) || errs[4] != nil {
		t.Fatalf("errors = %v, want nil, B failed, nil, D failed, nil", errs)
	}
	// Round 1: A, B (fails). Round 2: A, C, D (fails). Round 3: A, C, E.
	for name, want := range map[string]int{"A": 3, "B": 1, "C": 2, "D": 1, "E": 1} {
		if got := runs.n(name); got != want {
			t.Errorf("%s ran %d times, want %d", name, got, want)
		}
	}
	if sawC != "1" {
		t.Errorf("C saw a = %q, want A's write", sawC)
	}
	want := map[string]string{"b/a": "1", "b/c": "1", "b/e": "1"}
	if fmt.Sprint(e.committed) != fmt.Sprint(want) {
		t.Errorf("committed %v, want %v (nothing of B or D)", e.committed, want)
	}
	// The holding write's commit, then one commit for the group.
	if e.commits != 2 {
		t.Errorf("%d commits, want 2", e.commits)
	}
}

// TestCommitterCommitFailureReachesEveryCaller: when the commit fails,
// every function of the group gets the commit's error, including one that
// failed on its own (the state it saw never committed).
func TestCommitterCommitFailureReachesEveryCaller(t *testing.T) {
	t.Parallel()
	diskFull := errors.New("disk full")
	e := &memEngine{committed: map[string]string{}, commitErr: diskFull}
	own := errors.New("own failure")
	errs, first := group(e, nil,
		func(tx Tx) error { return tx.Put("b", []byte("a"), []byte("1")) },
		func(Tx) error { return own },
		func(tx Tx) error { return tx.Put("b", []byte("c"), []byte("1")) },
	)
	if !errors.Is(first, diskFull) {
		t.Fatalf("holding write: %v, want disk full", first)
	}
	for i, err := range errs {
		if !errors.Is(err, diskFull) {
			t.Errorf("write %d: %v, want the commit's error", i, err)
		}
	}
	if len(e.committed) != 0 {
		t.Errorf("committed %v after a failed commit, want nothing committed", e.committed)
	}
}

// TestCommitterEngineErrorRerunsTheWholeGroup: an error the engine marks
// as its own (a serialization failure returned through a function's read)
// is not the function's: the function is not taken out, and the engine's
// Attempt runs the whole group again.
func TestCommitterEngineErrorRerunsTheWholeGroup(t *testing.T) {
	t.Parallel()
	e := &memEngine{committed: map[string]string{}}
	var runs counter
	tripped := false
	errs, first := group(e, func(err error) bool { return errors.Is(err, errConflict) },
		func(tx Tx) error { runs.ran("A"); return tx.Put("b", []byte("a"), []byte("1")) },
		func(tx Tx) error {
			runs.ran("B")
			if !tripped {
				tripped = true
				return fmt.Errorf("read: %w", errConflict)
			}
			return tx.Put("b", []byte("b"), []byte("1"))
		},
	)
	if first != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors = %v, want nil, nil", errs)
	}
	if runs.n("A") != 2 || runs.n("B") != 2 {
		t.Errorf("runs = %v, want both twice (the whole group re-run)", runs.runs)
	}
	if e.committed["b/b"] != "1" {
		t.Errorf("committed b/b = %q, want %q (B's write): %v", e.committed["b/b"], "1", e.committed)
	}
}

// TestCommitterPanicReachesItsCaller: a panicking function fails alone, its
// panic is raised on its caller's goroutine, and the committer goes on.
func TestCommitterPanicReachesItsCaller(t *testing.T) {
	t.Parallel()
	e := &memEngine{committed: map[string]string{}}
	c := NewCommitter(e.attempt, nil)
	defer c.Close()
	got := func() (v any) {
		defer func() { v = recover() }()
		_ = c.Update(context.Background(), func(Tx) error { panic("bad function") })
		return nil
	}()
	if got != "bad function" {
		t.Fatalf("recovered %v, want the function's panic", got)
	}
	if err := c.Update(context.Background(), func(tx Tx) error { return tx.Put("b", []byte("k"), []byte("v")) }); err != nil {
		t.Fatalf("the committer did not survive: %v", err)
	}
}

// TestCommitterAfterCloseAndCancelled: a write after Close gets ErrClosed;
// a write whose context ended before it was queued gets the context's
// error and never runs.
func TestCommitterAfterCloseAndCancelled(t *testing.T) {
	t.Parallel()
	e := &memEngine{committed: map[string]string{}}
	c := NewCommitter(e.attempt, nil)
	c.Close()
	ran := false
	if err := c.Update(context.Background(), func(Tx) error { ran = true; return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if ran {
		t.Fatal("a write after Close ran")
	}

	// A full queue behind a held attempt: a cancelled caller gives up.
	e = &memEngine{committed: map[string]string{}, hold: make(chan struct{})}
	c = NewCommitter(e.attempt, nil)
	defer c.Close()
	release := e.hold
	go func() { _ = c.Update(context.Background(), func(Tx) error { return nil }) }()
	for heldAttempts(e) == 0 {
		runtime.Gosched()
	}
	var wg sync.WaitGroup
	for c.Queued() < maxGroup {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Update(context.Background(), func(Tx) error { return nil }) }()
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Update(ctx, func(Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before queueing: %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if ran {
		t.Fatal("a write cancelled before it was queued ran")
	}
}
