package bot

import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/kv"
)

// Deliverer delivers one outbox event to a sink (post or update a chat
// message, call an agent back). It must be idempotent per event: a crash
// between delivery and bookkeeping delivers the event again. A chat surface
// does not write one: it implements Renderer, and DeliverTo is its
// Deliverer. A Deliverer reports a failure as one of the kinds below and
// never decides what is done about it: Drain does, the same way for every
// sink.
type Deliverer func(ctx context.Context, ev Event) error

// RetryAfterError says the platform throttled the call (a 429): the event
// is retried no sooner than After (the platform's Retry-After), and the
// failure does not count towards giving the event up.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PermanentError says the platform will refuse the call however often it
// is made (a 4xx other than 408 and 429: a deleted message, a channel the
// bot cannot post in, a payload it rejects): the event is given up at once
// (Outbox.GivenUp records it, the log says why).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// UnavailableError says the platform cannot take any delivery now: it is
// unreachable, answers 5xx or 408, or refuses the credentials (a token
// being fixed). The event keeps its place and is retried with backoff
// until the platform is back, however long that takes: the failure is not
// the event's, and every later event of the sink would meet it too.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// GiveUpAfter is how many failures of its own an event may have before it
// is given up: a failure of any other kind than the three above (the item
// cannot be read or rendered, the platform answered something the adapter
// cannot make sense of). It bounds how long one event that cannot be
// delivered holds back every later event of its sink (1+2+4+8 seconds of
// backoff). Throttling and unavailability never count, and neither does a
// store that cannot be reached (kv.ErrUnavailable).
const GiveUpAfter = 5

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
// directly instead of running the loop. It decides, for every sink alike,
// what a failed delivery leads to: a permanent failure, or the
// GiveUpAfter-th failure of the event's own, gives the event up (recorded
// by GivenUp, counted in Stats, logged as an error); any other failure is
// retried after Backoff of the attempts so far, or after the platform's
// Retry-After when that is later. Events of a sink are delivered in order:
// a retried event holds back the later ones until the next pass.
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
			derr := o.deliver(ctx, ev, deliver) // in the delivery's span (trace.go)
			// Once delivered, record it even if shutdown began meanwhile, so
			// that a clean stop does not send it again.
			book := context.WithoutCancel(ctx)
			if derr == nil {
				if err := o.Delivered(book, ev); err != nil {
					return err
				}
				progressed = true
				continue
			}
			if ctx.Err() != nil && errors.Is(derr, ctx.Err()) {
				return ctx.Err() // stopped mid-delivery: neither a failure nor a give-up
			}
			var (
				perm  *PermanentError
				ra    *RetryAfterError
				unav  *UnavailableError
				fault = !errors.As(derr, &ra) && !errors.As(derr, &unav) && !errors.Is(derr, kv.ErrUnavailable)
			)
			if fault {
				ev.Faults++
			}
			if errors.As(derr, &perm) || ev.Faults >= GiveUpAfter {
				if err := o.giveUp(book, ev, derr); err != nil {
					return err
				}
				progressed = true
				continue
			}
			wait := Backoff(ev.Attempts + 1)
			if ra != nil && ra.After > wait {
				wait = ra.After
			}
			o.b.log.Warn("outbox delivery failed; will retry", "sink", sink, "item", ev.ItemID, "type", ev.Type, "attempt", ev.Attempts+1, "retry_in", wait, "err", derr)
			if err := o.retry(ctx, ev, o.b.now().Add(wait), derr); err != nil {
				return err
			}
			// Keep order per item: later events of this sink wait for
			// the next pass.
			return nil
		}
		if !progressed {
			return nil
		}
	}
}
