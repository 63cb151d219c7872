package actiontools

import (
	"context"
	"sync"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// notifier wakes long polls when a request is decided. It is in-process;
// replicas on one database forward each other's decisions (Service.Wake).
type notifier struct {
	mu sync.Mutex
	m  map[string]*waiters
}

type waiters struct {
	ch chan struct{}
	n  int
}

func newNotifier() *notifier { return &notifier{m: map[string]*waiters{}} }

// subscribe returns a channel closed at the next notify(id), and a release
// function the caller must call when it stops waiting.
func (n *notifier) subscribe(id string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.m[id]
	if w == nil {
		w = &waiters{ch: make(chan struct{})}
		n.m[id] = w
	}
	w.n++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			w.n--
			if w.n == 0 && n.m[id] == w {
				delete(n.m, id)
			}
		})
	}
}

// notify wakes every waiter of id.
func (n *notifier) notify(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w := n.m[id]; w != nil {
		close(w.ch)
		delete(n.m, id)
	}
}

// Wake wakes the long polls (action_status with wait_seconds) waiting on
// request id. The service wakes them itself when it decides a request; a
// replica calls Wake when another replica sharing the database did.
func (s *Service) Wake(id string) { s.waits.notify(id) }

// pendingWaiters counts the ids with waiters (for tests).
func (n *notifier) pendingWaiters() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.m)
}

// status is action_status: the request's state, after waiting up to
// wait_seconds for it to be decided.
func (s *Service) status(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*StatusArgs)
	var timer <-chan time.Time
	if args.WaitSeconds > 0 {
		t := time.NewTimer(time.Duration(args.WaitSeconds) * time.Second)
		defer t.Stop()
		timer = t.C
	}
	for {
		woken, release := s.waits.subscribe(args.RequestID)
		r, err := s.load(ctx, args.RequestID)
		if err != nil {
			release()
			return bot.Result{}, err
		}
		if r == nil {
			release()
			return bot.Result{}, bot.Errorf(bot.KindNotFound, "No request %s. Request ids come from confirm_action (req_…), request_approval (con_…) or ask_user (ask_…).", args.RequestID)
		}
		if !policy.InScope(c.Caller.Role, c.Caller.Scopes, r.Space.UserID) {
			release()
			return bot.Result{}, c.Refuse(ctx, &policy.Refusal{Check: policy.CheckScope, Message: policy.DenyScope("action_status")})
		}
		if now := s.b.Now(); r.Expired(now) {
			// Past expires_at: report it expired now, and record it, whether
			// or not the sweeper has run.
			if r, err = s.expireNow(ctx, r.ID, now); err != nil {
				release()
				return bot.Result{}, err
			}
		}
		if r.Status != approvals.StatusPending || timer == nil {
			release()
			return s.render(c.Caller.Decider(), r), nil
		}
		var expiry <-chan time.Time
		if !r.ExpiresAt.IsZero() {
			// Wake at the expiry too: the sweeper may be far away.
			et := time.NewTimer(max(r.ExpiresAt.Sub(s.b.Now()), 0))
			defer et.Stop()
			expiry = et.C
		}
		select {
		case <-expiry:
			release()
		case <-woken:
			release()
		case <-timer:
			release()
			timer = nil // one last look, then answer
		case <-s.b.Closing():
			release()
			timer = nil // the server is stopping: answer the current state now
		case <-ctx.Done():
			release()
			return bot.Result{}, ctx.Err()
		}
	}
}

// expireNow closes request id as expired at now if it is still pending and
// past its expiry (once: the sweeper or a decision may have done it
// meanwhile), and returns its current state.
func (s *Service) expireNow(ctx context.Context, id string, now time.Time) (*approvals.Request, error) {
	var r *approvals.Request
	err := s.b.SystemCall(now).Update(ctx, func(tx *bot.Tx) error {
		var err error
		if r, err = approvals.LoadRequest(tx, id); err != nil || r == nil {
			return err
		}
		if !r.Expired(now) {
			return nil
		}
		return expire(tx, r, now)
	})
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, bot.Errorf(bot.KindNotFound, "No request %s.", id)
	}
	s.waits.notify(id)
	return r, nil
}

// load reads one request.
func (s *Service) load(ctx context.Context, id string) (*approvals.Request, error) {
	var r *approvals.Request
	err := s.b.View(ctx, func(tx kv.Tx) error {
		var err error
		r, err = approvals.LoadRequest(tx, id)
		return err
	})
	return r, err
}
