package webhook

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// StoreStats is what the metrics read from the store at scrape time.
type StoreStats interface {
	PendingByKind(ctx context.Context) (map[bot.ItemKind]int, error)
	// PendingOldest is how long the oldest item awaiting a decision has
	// waited (0: none waits).
	PendingOldest(ctx context.Context) (time.Duration, error)
	OutboxStats(ctx context.Context) (map[string]bot.OutboxStat, error)
}

// Metrics are Countersign's Prometheus metrics. Counters move as calls
// happen; the gauges of pending items and outboxes are read from the store
// when scraped.
type Metrics struct {
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	waited    *prometheus.HistogramVec
	requests  *prometheus.CounterVec
	limited   *prometheus.CounterVec
	sweeps    prometheus.Counter
	replays   prometheus.Counter
}

// decisionTools maps the tools that decide a pending item to the decision.
var decisionTools = map[string]string{
	"confirm_change": "approved",
	"reject_change":  "rejected",
	"approve_action": "approved",
	"deny_action":    "denied",
}

// NewMetrics registers the metrics on reg (a registry of its own, never the
// global one), with a collector that reads stats at scrape time.
func NewMetrics(reg prometheus.Registerer, stats StoreStats, log *slog.Logger) (*Metrics, error) {
	log = orDiscard(log)
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_tool_calls_total",
			Help: "Tool calls by tool and outcome (ok, invalid, unauthenticated, denied, not_found, conflict, internal, ...). Calls of unknown tools count under tool=\"\".",
		}, []string{"tool", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "countersign_tool_call_duration_seconds",
			Help:    "Latency of tool calls, from authentication to answer, by tool.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"tool"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_decisions_total",
			Help: "Decisions taken on pending items (approved, rejected, denied) by the surface they came from (http, mcp, slack, discord, cli).",
		}, []string{"outcome", "surface"}),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "countersign_decision_latency_seconds",
			Help:    "Time to decision: from an item's card appearing (the item made) to the decision that closed it, by kind of item and outcome (approved, rejected, denied). Counted as decisions are taken.",
			Buckets: []float64{5, 15, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400},
		}, []string{"kind", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "countersign_rate_limited_total",
			Help: "Requests refused with 429 by the per-principal rate limit, by route.",
		}, []string{"route"}),
		sweeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "countersign_sweeper_runs_total",
			Help: "Sweeps run (stale proposals, timeouts, reminders, pruning).",
		}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "countersign_idempotent_replays_total",
			Help: "Tool calls answered from the Idempotency-Key record instead of running again.",
		}),
	}
	for _, c := range []prometheus.Collector{
		m.calls, m.latency, m.decisions, m.waited, m.requests, m.limited, m.sweeps, m.replays,
		newStoreCollector(stats, log),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveCall counts one finished tool call.
func (m *Metrics) ObserveCall(ev bot.CallEvent) {
	m.calls.WithLabelValues(ev.Tool, ev.Outcome()).Inc()
	if ev.Tool != "" {
		m.latency.WithLabelValues(ev.Tool).Observe(ev.Duration.Seconds())
	}
	// Only a new decision counts: an identical retry, answered with the
	// recorded outcome, is a call but not a decision.
	if d, ok := decisionTools[ev.Tool]; ok && ev.Err == nil && ev.Decided {
		m.decisions.WithLabelValues(d, ev.Surface()).Inc()
		if ev.Kind != "" {
			m.waited.WithLabelValues(string(ev.Kind), d).Observe(ev.Waited.Seconds())
		}
	}
}

// ObserveRequest counts one finished HTTP request (webhook Options.OnRequest).
func (m *Metrics) ObserveRequest(pattern string, status int, _ time.Duration) {
	if pattern == "" {
		pattern = "unmatched"
	}
	m.requests.WithLabelValues(pattern, strconv.Itoa(status)).Inc()
	if status == http.StatusTooManyRequests {
		m.limited.WithLabelValues(pattern).Inc()
	}
}

// SweepStep counts sweeps; install it with b.OnSweep. It changes nothing.
func (m *Metrics) SweepStep(context.Context, time.Time) (int, error) {
	m.sweeps.Inc()
	return 0, nil
}

// Replayed counts an answer replayed for an Idempotency-Key.
func (m *Metrics) Replayed() { m.replays.Inc() }

// storeCollector reads pending items and outboxes at scrape time. Scrapes
// that arrive while a reading is under way share it, so that many scrapers
// at once read the store once.
type storeCollector struct {
	stats StoreStats
	log   *slog.Logger

	pending, oldest, depth, retrying, failures, givenUp, up *prometheus.Desc

	mu  sync.Mutex
	cur *reading // the reading under way, if any
}

type reading struct {
	done    chan struct{}
	metrics []prometheus.Metric
}

func newStoreCollector(stats StoreStats, log *slog.Logger) *storeCollector {
	return &storeCollector{
		stats:    stats,
		log:      log,
		pending:  prometheus.NewDesc("countersign_pending_items", "Items awaiting a decision, by kind (memory_change, action, consent, question).", []string{"kind"}, nil),
		oldest:   prometheus.NewDesc("countersign_pending_oldest_seconds", "Age of the oldest item awaiting a decision, in seconds (0 when none waits).", nil, nil),
		depth:    prometheus.NewDesc("countersign_outbox_depth", "Notifications queued for delivery, by sink.", []string{"sink"}, nil),
		retrying: prometheus.NewDesc("countersign_outbox_retrying", "Queued notifications whose last delivery attempt failed, by sink.", []string{"sink"}, nil),
		failures: prometheus.NewDesc("countersign_outbox_failed_attempts", "Failed delivery attempts of the notifications still queued, by sink.", []string{"sink"}, nil),
		givenUp:  prometheus.NewDesc("countersign_outbox_given_up_total", "Notifications the outbox gave up delivering (refused for good, or failing on their own), by sink.", []string{"sink"}, nil),
		up:       prometheus.NewDesc("countersign_store_readable", "1 if the last scrape could read the store, else 0.", nil, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.oldest, c.depth, c.retrying, c.failures, c.givenUp, c.up} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.cur
	if r == nil {
		r = &reading{done: make(chan struct{})}
		c.cur = r
		c.mu.Unlock()
		r.metrics = c.read()
		c.mu.Lock()
		c.cur = nil
		close(r.done)
	}
	c.mu.Unlock()
	<-r.done
	for _, m := range r.metrics {
		ch <- m
	}
}

func (c *storeCollector) read() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []prometheus.Metric
	readable := 1.0
	pending, err := c.stats.PendingByKind(ctx)
	if err != nil {
		c.log.Warn("metrics: could not count pending items", "err", err)
		readable = 0
	}
	for kind, n := range pending {
		out = append(out, prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), string(kind)))
	}
	if age, err := c.stats.PendingOldest(ctx); err != nil {
		c.log.Warn("metrics: could not read the oldest pending item", "err", err)
		readable = 0
	} else {
		out = append(out, prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, max(age.Seconds(), 0)))
	}
	boxes, err := c.stats.OutboxStats(ctx)
	if err != nil {
		c.log.Warn("metrics: could not read the outboxes", "err", err)
		readable = 0
	}
	for sink, st := range boxes {
		out = append(out,
			prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(st.Depth), sink),
			prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(st.Retrying), sink),
			prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(st.Failures), sink),
			prometheus.MustNewConstMetric(c.givenUp, prometheus.CounterValue, float64(st.GivenUp), sink),
		)
	}
	return append(out, prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, readable))
}

// MetricsHandler serves g in the Prometheus text format. With a token, a
// scrape must send "Authorization: Bearer <token>".
func MetricsHandler(g prometheus.Gatherer, token bot.Secret, log *slog.Logger) http.Handler {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token.Reveal()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(BearerKey(r)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="countersign-metrics"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized: /metrics needs Authorization: Bearer <the token in http.metrics_token_env>"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LogCall writes one structured line per tool call: who, what, how it ended,
// how long it took. Never the arguments or the answer, which may hold
// personal data or a key.
func LogCall(ctx context.Context, log *slog.Logger, ev bot.CallEvent) {
	level := slog.LevelInfo
	if ev.Outcome() == "internal" {
		level = slog.LevelError
	}
	principal := "-"
	if ev.Caller != nil {
		principal = ev.Caller.String()
	}
	tool := ev.Tool
	if tool == "" {
		tool = "(unknown)"
	}
	log.LogAttrs(ctx, level, "tool call",
		slog.String("request_id", bot.RequestID(ctx)),
		slog.String("principal", principal),
		slog.String("surface", ev.Surface()),
		slog.String("tool", tool),
		slog.String("outcome", ev.Outcome()),
		slog.Duration("duration", ev.Duration),
	)
}

// BotStats is what the metrics read from b's store at scrape time: the
// items awaiting a decision and the outboxes.
func BotStats(b *bot.Bot) StoreStats { return botStats{b} }

// botStats is BotStats's StoreStats.
type botStats struct{ *bot.Bot }

// PendingByKind counts the items awaiting a decision (bot.Items).
func (s botStats) PendingByKind(ctx context.Context) (map[bot.ItemKind]int, error) {
	return s.Items().PendingByKind(ctx)
}

// PendingOldest is how long the oldest item awaiting a decision has
// waited, on the bot's clock.
func (s botStats) PendingOldest(ctx context.Context) (time.Duration, error) {
	t, err := s.Items().PendingOldest(ctx)
	if err != nil || t.IsZero() {
		return 0, err
	}
	return max(s.Now().Sub(t), 0), nil
}

// OutboxStats reads every sink's outbox (bot.Outbox.Stats).
func (s botStats) OutboxStats(ctx context.Context) (map[string]bot.OutboxStat, error) {
	return s.Outbox().Stats(ctx)
}
