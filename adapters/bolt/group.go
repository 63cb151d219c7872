package bolt

import (
	"context"
	"errors"
	"sync"

	"github.com/countersign/countersign/kv"
	bbolt "go.etcd.io/bbolt"
)

// errBatchFailed rolls back a group transaction in which one function
// failed; the functions are then re-run one transaction each.
var errBatchFailed = errors.New("bolt: a function of the group failed")

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
// A function may run more than once (when another function of its group
// fails, the group is rolled back and each function re-run alone), so it
// must assign, not accumulate, whatever it hands back to its caller.
type committer struct {
	db     *bbolt.DB
	reqs   chan commitReq
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.RWMutex // held for reading while a request is being queued
	closed bool
}

func newCommitter(db *bbolt.DB) *committer {
	c := &committer{db: db, reqs: make(chan commitReq, maxGroup), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

func (c *committer) update(ctx context.Context, fn func(kv.Tx) error) error {
	r := commitReq{fn: fn, done: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errors.New("bolt: store closed")
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
	return <-r.done
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
					r.done <- errors.New("bolt: store closed")
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

func (c *committer) commit(group []commitReq) {
	if len(group) == 1 {
		group[0].done <- c.db.Update(func(t *bbolt.Tx) error { return group[0].fn(&tx{t: t}) })
		return
	}
	errs := make([]error, len(group))
	err := c.db.Update(func(t *bbolt.Tx) error {
		for i, r := range group {
			if errs[i] = r.fn(&tx{t: t}); errs[i] != nil {
				return errBatchFailed
			}
		}
		return nil
	})
	if err == nil {
		for _, r := range group {
			r.done <- nil
		}
		return
	}
	// One function failed (or the commit did): re-run each alone so that
	// only the failing ones fail.
	for _, r := range group {
		r.done <- c.db.Update(func(t *bbolt.Tx) error { return r.fn(&tx{t: t}) })
	}
}
