package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/countersign/countersign/kv"
)

// errFnFailed rolls back a group transaction in which one function failed.
var errFnFailed = errors.New("postgres: a function of the group failed")

// errClosed is the answer of a write queued on a closed store.
var errClosed = errors.New("postgres: store closed")

// maxGroup bounds how many writes one group commit takes.
const maxGroup = 256

type commitReq struct {
	ctx  context.Context
	fn   func(kv.Tx) error
	done chan error
}

// committer merges the concurrent Updates of one process into one
// transaction, as the bbolt engine's group commit does: one goroutine takes
// the first queued write and whatever else is queued, and commits them
// together. The rules are the same:
//
//   - A function runs in a transaction that also holds the writes of the
//     functions before it in its group.
//   - A function that returns an error fails alone: the group is rolled back
//     and run again without it. Its error is delivered once the state it saw
//     has committed (or with the commit's error).
//   - The PreCommits run once per transaction, after its last function.
//   - A serialization failure or deadlock re-runs the whole group.
//
// It matters more here than on bbolt: the audit chain makes every write of
// every replica touch the same rows, so replicas' transactions serialise on
// them; a group pays for that once per commit, not once per write.
type committer struct {
	d      *DB
	reqs   chan commitReq
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.RWMutex
	closed bool
}

func newCommitter(d *DB) *committer {
	c := &committer{d: d, reqs: make(chan commitReq, maxGroup), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

func (c *committer) update(ctx context.Context, fn func(kv.Tx) error) error {
	r := commitReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
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
	// Once queued the write is never abandoned: wait for its outcome.
	err := <-r.done
	var p *fnPanic
	if errors.As(err, &p) {
		panic(p.val)
	}
	return err
}

// fnPanic carries a function's panic from the committer to its caller.
type fnPanic struct{ val any }

func (p *fnPanic) Error() string {
	return fmt.Sprintf("postgres: update function panicked: %v", p.val)
}

func runFn(fn func(kv.Tx) error, t kv.Tx) (err error) {
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

// commit commits a group, taking out the functions that fail, until a
// transaction of the rest commits or none remain.
func (c *committer) commit(group []commitReq) {
	var failed []commitReq
	var failedErrs []error
	// The transaction outlives any one caller's context: a queued write is
	// never abandoned half way (statement_timeout bounds it).
	ctx := context.Background()
	for len(group) > 0 {
		bad, badErr := -1, error(nil)
		err := c.d.commit(ctx, func(x *tx) error {
			bad, badErr = -1, nil
			for i, r := range group {
				if e := runFn(r.fn, x); e != nil {
					if !isFnErr(e) {
						// The database's error, not the function's: the
						// whole transaction is retried or fails.
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
				group[0].done <- badErr
				return
			}
			failed = append(failed, group[bad])
			failedErrs = append(failedErrs, badErr)
			group = append(group[:bad:bad], group[bad+1:]...)
			continue
		}
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
	for i, r := range failed {
		r.done <- failedErrs[i]
	}
}
