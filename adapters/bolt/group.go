package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/countersign/countersign/kv"
	bbolt "go.etcd.io/bbolt"
)

// errFnFailed rolls back a group transaction in which one function failed.
var errFnFailed = errors.New("bolt: a function of the group failed")

// errClosed is the answer of a write queued on a closed store.
var errClosed = errors.New("bolt: store closed")

// maxGroup bounds how many writes one group commit takes.
const maxGroup = 256

type commitReq struct {
	fn   func(kv.Tx) error
	done chan error
}

// committer is a timer-free group committer: one goroutine blocks for the
// first queued write, takes whatever else is already queued without
// waiting, and commits them all in one bbolt transaction. On an idle system
// a write costs one commit; under load, batches form on their own.
//
// The contract, for every function handed to Update:
//
//   - A function runs in a transaction that also holds the writes of the
//     functions queued before it in its group, exactly as if those had
//     committed just before it.
//   - A function that returns an error fails alone: the group is rolled
//     back and re-run without it, so the functions queued before it run a
//     second time (against the same state, so they take the same path). A
//     function must therefore assign, not accumulate, whatever it hands back
//     to its caller, and do nothing outside the transaction.
//   - The failing function's error is delivered only once the state it saw
//     has committed; if that commit fails, it gets the commit's error.
//   - The PreCommits the functions register (kv.Finisher) run once, after
//     the last function of the group and before the commit. A PreCommit
//     that fails rolls the group back and every function of it gets the
//     error; the store does not fail (nothing was written).
//   - A commit that fails is never retried: every function of the group gets
//     the error and the store fails (see DB.Err).
type committer struct {
	d      *DB
	reqs   chan commitReq
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.RWMutex // held for reading while a request is being queued
	closed bool
}

func newCommitter(d *DB) *committer {
	c := &committer{d: d, reqs: make(chan commitReq, maxGroup), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

func (c *committer) update(ctx context.Context, fn func(kv.Tx) error) error {
	r := commitReq{fn: fn, done: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errClosed
	}
	select {
	case c.reqs <- r:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return ctx.Err()
	}
	// Once queued the write is never abandoned: wait for its outcome, so a
	// caller never sees "cancelled" for a write that then commits.
	err := <-r.done
	var p *fnPanic
	if errors.As(err, &p) {
		// Re-raise on the caller's goroutine, where a plain Update would
		// have panicked (and where the server's recovery handles it).
		panic(p.val)
	}
	return err
}

// fnPanic carries a function's panic from the committer to its caller.
type fnPanic struct{ val any }

func (p *fnPanic) Error() string { return fmt.Sprintf("bolt: update function panicked: %v", p.val) }

// run calls fn, turning a panic into an error so that one bad function
// cannot take the committer (and the process) down.
func run(fn func(kv.Tx) error, t kv.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &fnPanic{val: v}
		}
	}()
	return fn(t)
}

func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
}

func (c *committer) loop() {
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
					r.done <- errClosed
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
// remain). Each round drops at least one function, so it ends.
func (c *committer) commit(group []commitReq) {
	if err := c.d.Err(); err != nil {
		for _, r := range group {
			r.done <- err
		}
		return
	}
	var failed []commitReq // taken out; their errors wait for the commit
	var failedErrs []error
	for len(group) > 0 {
		bad, badErr := -1, error(nil)
		err := c.d.commit(func(t *bbolt.Tx, h *kv.Hooks) error {
			x := &tx{t: t, hooks: h, sequential: c.d.sequential}
			for i, r := range group {
				if e := run(r.fn, x); e != nil {
					bad, badErr = i, e
					return errFnFailed
				}
			}
			return nil
		})
		if bad >= 0 {
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
		// Committed (err == nil) or the commit failed: either way every
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
