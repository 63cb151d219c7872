package bot

import (
	"context"
	"errors"
	"time"
)

// Deliverer delivers one outbox event to a sink (post or update a chat
// message, call an agent back). It must be idempotent per event: a crash
// between delivery and bookkeeping delivers the event again.
type Deliverer func(ctx context.Context, ev Event) error

// RetryAfterError asks the worker to retry no sooner than After (a platform's
// Retry-After on a 429).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PermanentError marks a delivery that must not be retried (a 4xx other than
// 408 and 429); the event is dropped and the failure logged.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Backoff returns the delay before attempt n (1-based): 1s, 2s, 4s ... capped
// at 5 minutes.
func Backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// Run drains sink's events until ctx ends: every queued event is handed
// to deliver in order, removed once delivered, and retried with backoff when
// delivery fails, so a platform that is down never blocks an agent. poll is
// how often it looks again when idle (Wake shortens the wait).
func (o *Outbox) Run(ctx context.Context, sink string, poll time.Duration, deliver Deliverer) error {
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		// Take the wake channel before draining, so a commit that lands
		// during the drain is not missed.
		woken := o.woken()
		if err := o.Drain(ctx, sink, deliver); err != nil && ctx.Err() == nil {
			o.b.log.Warn("outbox drain", "sink", sink, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-woken:
		}
	}
}

// Drain delivers every event of sink that is due now, once. Tests call it
// directly instead of running the loop.
func (o *Outbox) Drain(ctx context.Context, sink string, deliver Deliverer) error {
	for {
		evs, err := o.Due(ctx, sink, o.b.now(), 100)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		progressed := false
		for _, ev := range evs {
			if err := ctx.Err(); err != nil {
				return err
			}
			derr := deliver(ctx, ev)
			// Once delivered, record it even if shutdown began meanwhile, so
			// that a clean stop does not send it again.
			book := context.WithoutCancel(ctx)
			var perm *PermanentError
			switch {
			case derr == nil:
				if err := o.Delivered(book, ev); err != nil {
					return err
				}
				progressed = true
			case errors.As(derr, &perm):
				o.b.log.Error("outbox delivery failed permanently; dropped", "sink", sink, "item", ev.ItemID, "type", ev.Type, "err", derr)
				if err := o.Delivered(book, ev); err != nil {
					return err
				}
				progressed = true
			default:
				wait := Backoff(ev.Attempts + 1)
				var ra *RetryAfterError
				if errors.As(derr, &ra) && ra.After > wait {
					wait = ra.After
				}
				o.b.log.Warn("outbox delivery failed; will retry", "sink", sink, "item", ev.ItemID, "type", ev.Type, "attempt", ev.Attempts+1, "retry_in", wait, "err", derr)
				if err := o.Retry(ctx, ev, o.b.now().Add(wait), derr); err != nil {
					return err
				}
				// Keep order per item: later events of this sink wait for
				// the next pass.
				return nil
			}
		}
		if !progressed {
			return nil
		}
	}
}
