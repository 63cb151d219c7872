package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
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

// RunSweeps runs every sweep step once at start (what expired while the
// server was down is closed before anyone waits a sweep interval for it),
// then on schedule (a cron spec: sweep.schedule) until ctx ends, logging
// what each sweep changed to log. A sweep still running when the
// next is due is skipped, and a panic in one is recovered and logged.
func (b *Bot) RunSweeps(ctx context.Context, schedule string, log *slog.Logger) error {
	logger := cronLogger{log.With("runner", "sweeper")}
	c := cron.New(cron.WithLogger(logger), cron.WithChain(cron.SkipIfStillRunning(logger), cron.Recover(logger)))
	sweep := cron.NewChain(cron.Recover(logger)).Then(cron.FuncJob(func() {
		rep, err := b.Sweep(ctx, b.Now())
		if err != nil && ctx.Err() == nil {
			log.Error("sweep", "err", err, "report", rep)
			return
		}
		for step, n := range rep {
			if n > 0 {
				log.Info("sweep", "step", step, "changed", n)
			}
		}
	}))
	if _, err := c.AddJob(schedule, sweep); err != nil {
		return fmt.Errorf("sweep.schedule %q: %w", schedule, err)
	}
	sweep.Run()
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	return nil
}

// cronLogger adapts slog to cron's logger.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}
