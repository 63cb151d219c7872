package webhook

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReviewCollector: the break-glass gauges are counted at each scrape;
// a store that cannot be read gives no value (never a zero that reads as
// "nothing overdue") and a warning.
func TestReviewCollector(t *testing.T) {
	t.Parallel()
	open, overdue, fail := 2, 1, error(nil)
	var logs bytes.Buffer
	c := NewReviewCollector(func(context.Context) (int, int, error) { return open, overdue, fail }, slog.New(slog.NewTextHandler(&logs, nil)))
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	scrape := func() map[string]float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				got[f.GetName()] = m.GetGauge().GetValue()
			}
		}
		return got
	}
	check := func(wantOpen, wantOverdue float64) {
		t.Helper()
		got := scrape()
		if len(got) != 2 || got["countersign_break_glass_reviews_open"] != wantOpen || got["countersign_break_glass_reviews_overdue"] != wantOverdue {
			t.Errorf("scraped %v, want open %v and overdue %v", got, wantOpen, wantOverdue)
		}
	}
	check(2, 1)
	open, overdue = 0, 3 // read anew at the next scrape
	check(0, 3)
	fail = errors.New("store closed")
	if got := scrape(); len(got) != 0 {
		t.Errorf("with the store unreadable: %v, want no series", got)
	}
	if !strings.Contains(logs.String(), "reading the break-glass reviews") || !strings.Contains(logs.String(), "store closed") {
		t.Errorf("no warning for the unreadable store, want %q and %q in:\n%s", "reading the break-glass reviews", "store closed", logs.String())
	}
}
