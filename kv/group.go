package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrClosed is the answer of a write handed to a Committer after Close, or
// still queued when Close was called.
var ErrClosed = errors.New("kv: store closed")

// errFnFailed rolls back a group's transaction in which one function failed.
var errFnFailed = errors.New("kv: a function of the group failed")

// maxGroup bounds how many writes one group commit takes.
const maxGroup = 256

// Attempt runs run in one new read-write transaction of an engine, then the
// PreCommits registered in it (Hooks), and commits it. An error of run or
// of a PreCommit rolls the transaction back and is returned as it is; any
// other error is the engine's. An engine may call run more than once (each
// time in a new transaction, after rolling back the last), for example after
// a serialization conflict; only the run whose transaction committed counts.
type Attempt func(run func(Tx) error) error

// Committer is a timer-free group committer, shared by the engines: one
// goroutine blocks for the first queued write, takes whatever else is
// already queued without waiting, and commits them all in one transaction
// (one Attempt). On an idle system a write costs one commit; under load,
// batches form on their own, and the cost of a commit (an fsync, a
// database round trip, the signature of the audit chain's head) is paid once
// per group instead of once per write.
//
// The contract, for every function handed to Update:
//
//   - Functions run in the order they were queued. A function runs in a
//     transaction that also holds the writes of the functions queued before
//     it in its group, exactly as if those had committed just before it.
//   - A function that returns an error fails alone: the group is rolled back
//     and re-run without it, so the functions queued before it run a second
//     time (against the same state, so they take the same path). Each
//     round takes at least one function out, so a group ends. A function may
//     therefore run more than once (Store's rule): it must assign, not
//     accumulate, whatever it hands back to its caller, and do nothing
//     outside the transaction.
//   - Every caller gets its own outcome: nil when the transaction holding
//     its function committed; its own function's error, delivered only once
//     the state that function saw has committed (if that commit fails, the
//     commit's error instead); the commit's error when the commit fails.
//   - The PreCommits the functions register (Finisher) run once, after the
//     last function of the group and before the commit. A PreCommit that
//     fails rolls the group back and every function of it gets the error.
//   - An error for which EngineErr reports true (the engine's own, returned
//     through a function: a conflict, a lost connection) is not the
//     function's: the whole attempt fails with it, and Attempt decides
//     whether to run the group again. A commit that fails is never re-run
//     by the Committer; every function of the group gets the error.
//   - A function that panics fails alone like one that returns an error,
//     and the panic is raised again on its caller's goroutine, so one bad
//     function cannot take the committer (and the process) down.
//   - A write once queued is never abandoned: Update waits for its outcome
//     even when ctx ends, so a caller never sees "cancelled" for a write
//     that then commits.
type Committer struct {
	attempt   Attempt
	engineErr func(error) bool
	reqs      chan commitReq
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.RWMutex // held for reading while a request is being queued
	closed    bool
}

type commitReq struct {
	fn   func(Tx) error
	done chan error
}

// NewCommitter starts a Committer that commits each group with attempt.
// engineErr, which may be nil, reports the errors of the engine's own that
// reach the Committer through a function (see Committer). Close stops it.
func NewCommitter(attempt Attempt, engineErr func(error) bool) *Committer {
	c := &Committer{attempt: attempt, engineErr: engineErr, reqs: make(chan commitReq, maxGroup), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

// Update queues fn and returns once the group holding it has committed (nil)
// or fn's own error or the commit's (see Committer for which). It returns
// ctx's error only when ctx ends before fn was queued, and ErrClosed after
// Close.
func (c *Committer) Update(ctx context.Context, fn func(Tx) error) error {
	r := commitReq{fn: fn, done: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	select {
	case c.reqs <- r:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return ctx.Err()
	}
	err := <-r.done
	var p *fnPanic
	if errors.As(err, &p) {
		// Re-raise on the caller's goroutine, where a plain Update would
		// have panicked (and where the server's recovery handles it).
		panic(p.val)
	}
	return err
}

// Queued returns how many writes wait for the next group (for tests that
// arrange a group, and for observation).
func (c *Committer) Queued() int { return len(c.reqs) }

// Close stops the committer once the group being committed has its
// outcome; writes still queued get ErrClosed. It must be called once.
func (c *Committer) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
}

// fnPanic carries a function's panic from the committer to its caller.
type fnPanic struct{ val any }

func (p *fnPanic) Error() string { return fmt.Sprintf("kv: update function panicked: %v", p.val) }

// runFn calls fn, turning a panic into an error.
func runFn(fn func(Tx) error, tx Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &fnPanic{val: v}
		}
	}()
	return fn(tx)
}

func (c *Committer) loop() {
	defer c.wg.Done()
	for {
		var first commitReq
		select {
		case first = <-c.reqs:
		case <-c.stop:
			// Fail whatever is still queued; nothing new can arrive.
			for {
				select {
				case r := <-c.reqs:
					r.done <- ErrClosed
				default:
					return
				}
			}
		}
		group := []commitReq{first}
	collect:
		for len(group) < maxGroup {
			select {
			case r := <-c.reqs:
				group = append(group, r)
			default:
				break collect
			}
		}
		c.commit(group)
	}
}

// commit commits a group. A function that fails is taken out and the rest
// re-run, until a transaction of the remaining functions commits (or none
// remain).
func (c *Committer) commit(group []commitReq) {
	var failed []commitReq // taken out; their errors wait for the commit
	var failedErrs []error
	for len(group) > 0 {
		bad, badErr := -1, error(nil)
		err := c.attempt(func(tx Tx) error {
			bad, badErr = -1, nil // Attempt may run this more than once
			for i, r := range group {
				if e := runFn(r.fn, tx); e != nil {
					if c.engineErr != nil && c.engineErr(e) {
						return e
					}
					bad, badErr = i, e
					return errFnFailed
				}
			}
			return nil
		})
		if bad >= 0 && errors.Is(err, errFnFailed) {
			if len(group) == 1 && len(failed) == 0 {
				// A lone function: nothing else saw its state.
				group[0].done <- badErr
				return
			}
			failed = append(failed, group[bad])
			failedErrs = append(failedErrs, badErr)
			group = append(group[:bad:bad], group[bad+1:]...)
			continue
		}
		// Committed (err == nil) or the attempt failed: either way every
		// remaining function shares its outcome.
		for _, r := range group {
			r.done <- err
		}
		for i, r := range failed {
			if err != nil {
				r.done <- err
			} else {
				r.done <- failedErrs[i]
			}
		}
		return
	}
	// Every function failed; the (empty) state they saw is the committed one.
	for i, r := range failed {
		r.done <- failedErrs[i]
	}
}
