package bot_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
)

func TestRateLimiterTokenBucket(t *testing.T) {
	clk := bottest.NewClock(time.Date(2026, 9, 26, 12, 0, 0, 0, time.UTC))
	l := bot.NewRateLimiter(60, 3, clk.Now) // one a second, bursts of 3
	steps := []struct {
		advance time.Duration
		key     string
		ok      bool
		wait    time.Duration
	}{
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", false, time.Second},
		{0, "b", true, 0}, // buckets are per principal
		{500 * time.Millisecond, "a", false, 500 * time.Millisecond},
		{500 * time.Millisecond, "a", true, 0},
		{0, "a", false, time.Second},
		{time.Hour, "a", true, 0}, // refills to the burst, not beyond
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", false, time.Second},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		ok, wait := l.Allow(s.key)
		if ok != s.ok || wait != s.wait {
			t.Fatalf("step %d: Allow(%s) = %v, %v; want %v, %v", i, s.key, ok, wait, s.ok, s.wait)
		}
	}
	if bot.NewRateLimiter(0, 10, nil) != nil {
		t.Fatal("a zero rate should mean no limiter")
	}
	var none *bot.RateLimiter
	if ok, _ := none.Allow("x"); !ok {
		t.Fatal("no limiter must allow")
	}
}
