package bot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SweepStep is one part of a sweep (close stale memory proposals, time out
// action requests, send reminders). It works in bounded batches so that no
// write transaction is held for long, and returns how many items it changed.
type SweepStep func(ctx context.Context, now time.Time) (int, error)

type namedStep struct {
	name string
	fn   SweepStep
}

// OnSweep adds a step to every sweep, run in the order added.
func (b *Bot) OnSweep(name string, fn SweepStep) {
	b.sweepSteps = append(b.sweepSteps, namedStep{name, fn})
}

// SweepReport says what one sweep changed, by step.
type SweepReport map[string]int

// Sweep runs every step once at now. It is a function of now: tests call it
// with fixed times; the cron schedule calls it with the clock.
func (b *Bot) Sweep(ctx context.Context, now time.Time) (SweepReport, error) {
	rep := SweepReport{}
	var errs []error
	for _, s := range b.sweepSteps {
		n, err := s.fn(ctx, now)
		rep[s.name] = n
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return rep, errors.Join(errs...)
}
