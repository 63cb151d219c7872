package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/prometheus/client_golang/prometheus"
)

// breakGlassCollector serves the break-glass reviews on /metrics, read
// from the store at scrape time: countersign_break_glass_reviews_open and
// countersign_break_glass_reviews_overdue (past break_glass.review.within
// and not yet countersigned: each blocks its breaker's next break-glass).
type breakGlassCollector struct {
	b             *bot.Bot
	log           *slog.Logger
	open, overdue *prometheus.Desc
}

func newBreakGlassCollector(b *bot.Bot, log *slog.Logger) *breakGlassCollector {
	return &breakGlassCollector{
		b: b, log: log,
		open:    prometheus.NewDesc("countersign_break_glass_reviews_open", "Break-glass reviews awaiting countersignatures.", nil, nil),
		overdue: prometheus.NewDesc("countersign_break_glass_reviews_overdue", "Break-glass reviews past their window (break_glass.review.within) and not yet countersigned; each blocks its breaker's next break-glass.", nil, nil),
	}
}

// Describe sends the two gauges' descriptions.
func (c *breakGlassCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.overdue
}

// Collect reads the open reviews at the bot's now; when the store cannot
// be read it sends nothing (countersign_store_readable says so).
func (c *breakGlassCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := actiontools.CountReviews(ctx, c.b, c.b.Now())
	if err != nil {
		c.log.Warn("metrics: reading the break-glass reviews", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(rc.Open))
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(rc.Overdue))
}
