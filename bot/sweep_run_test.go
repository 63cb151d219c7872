package bot_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest/testbot"
)

// TestRunSweepsSweepsAtStartAndStops: RunSweeps sweeps once before its
// first scheduled run (what expired while the server was down is closed
// at once), returns when its context ends, and refuses a schedule cron
// cannot read, naming the key.
func TestRunSweepsSweepsAtStartAndStops(t *testing.T) {
	t.Parallel()
	b := testbot.New(t, bot.Options{})
	swept := make(chan struct{}, 1)
	b.OnSweep("probe", func(context.Context, time.Time) (int, error) {
		select {
		case swept <- struct{}{}:
		default:
		}
		return 1, nil
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.RunSweeps(ctx, "@every 24h", log) }()
	<-swept // the start's sweep, a day before the schedule's first
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunSweeps after its context ended: %v, want nil", err)
	}
	if err := b.RunSweeps(t.Context(), "every minute", log); err == nil {
		t.Error(`RunSweeps("every minute"): nil error, want the schedule refused`)
	}
}
