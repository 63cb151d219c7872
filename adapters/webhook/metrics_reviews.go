package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReviewCount counts the break-glass reviews awaiting countersignatures
// (open) and those of them past their window (overdue), at scrape time.
type ReviewCount func(ctx context.Context) (open, overdue int, err error)

// NewReviewCollector serves the break-glass reviews on /metrics, counted
// by count when scraped: countersign_break_glass_reviews_open and
// countersign_break_glass_reviews_overdue (past break_glass.review.within
// and not yet countersigned: each blocks its breaker's next break-glass).
// When the store cannot be read it sends nothing and logs why
// (countersign_store_readable says so too).
func NewReviewCollector(count ReviewCount, log *slog.Logger) prometheus.Collector {
	return &reviewCollector{
		count: count, log: orDiscard(log),
		open:    prometheus.NewDesc("countersign_break_glass_reviews_open", "Break-glass reviews awaiting countersignatures.", nil, nil),
		overdue: prometheus.NewDesc("countersign_break_glass_reviews_overdue", "Break-glass reviews past their window (break_glass.review.within) and not yet countersigned; each blocks its breaker's next break-glass.", nil, nil),
	}
}

// reviewCollector is NewReviewCollector's collector.
type reviewCollector struct {
	count         ReviewCount
	log           *slog.Logger
	open, overdue *prometheus.Desc
}

// Describe sends the two gauges' descriptions.
func (c *reviewCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.overdue
}

// Collect counts the reviews now.
func (c *reviewCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	open, overdue, err := c.count(ctx)
	if err != nil {
		c.log.Warn("metrics: reading the break-glass reviews", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(overdue))
}
