package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/kv"
)

// TestUpstreamsRunAndSweep: a run has no id until it is set; without run
// claims (one process) it gets a random one of its own each start; the
// forwarding sweep reports nothing while one process is not serving yet,
// and, once it serves, reports a past run's marker as of unknown outcome,
// never this run's own.
func TestUpstreamsRunAndSweep(t *testing.T) {
	b := testbot.New(t, bot.Options{Store: bottest.OpenStore(t)})
	var reported []string
	u := NewUpstreams(b, nil, nil, nil)
	u.Report = func(_ context.Context, _ *bot.Caller, id, _, _ string, drop func(kv.Tx) error) error {
		reported = append(reported, id)
		return b.Store().Update(context.Background(), drop)
	}
	if u.Run() != "" {
		t.Fatalf("a run before SetRun: %q, want none", u.Run())
	}
	ctx := context.Background()
	past := &waiter{store: b.Store(), run: func() string { return "local-past" }, now: time.Now}
	mine := &waiter{store: b.Store(), run: u.Run, now: time.Now}
	if _, err := past.mark(ctx, &bot.Caller{Principal: bot.Principal{ID: "prin_1"}}, "req_past", "t"); err != nil {
		t.Fatal(err)
	}
	if n, err := u.SweepForwarding(ctx, time.Now()); n != 0 || err != nil || len(reported) != 0 {
		t.Fatalf("the sweep before this run serves: %d %v %v, want nothing reported", n, err, reported)
	}
	u.SetRun("")
	first := u.Run()
	u.SetRun("")
	if !strings.HasPrefix(first, "local-") || u.Run() == first {
		t.Fatalf("runs without claims: %q then %q, want two random local- ids", first, u.Run())
	}
	if _, err := mine.mark(ctx, &bot.Caller{Principal: bot.Principal{ID: "prin_1"}}, "req_mine", "t"); err != nil {
		t.Fatal(err)
	}
	if n, err := u.SweepForwarding(ctx, time.Now()); n != 1 || err != nil || len(reported) != 1 || reported[0] != "req_past" {
		t.Fatalf("the sweep once serving: %d %v %v, want only req_past reported", n, err, reported)
	}
}
