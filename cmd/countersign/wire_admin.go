package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/countersign/countersign/adapters/mcp"
	"github.com/countersign/countersign/adapters/postgres"
	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/admintools"
	"github.com/prometheus/client_golang/prometheus"
)

// wireAdmin wires the administration and accountability tools, MCP over
// HTTP, the hardening of the HTTP API (rate limits, Idempotency-Key, host
// checks) and observability (metrics, per-call logs).
func (a *app) wireAdmin(ctx context.Context) error {
	if err := admintools.RegisterWith(a.bot, a.auditToolOptions()); err != nil {
		return err
	}
	h := a.cfg.HTTP

	// Observability: a registry of our own, never the global one.
	reg := prometheus.NewRegistry()
	metrics, err := webhook.NewMetrics(reg, webhook.BotStats(a.bot), a.log)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	reviews := func(ctx context.Context) (int, int, error) {
		rc, err := actiontools.CountReviews(ctx, a.bot, a.bot.Now())
		return rc.Open, rc.Overdue, err
	}
	if err := reg.Register(webhook.NewReviewCollector(reviews, a.log)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.bot.SetObserver(func(ctx context.Context, ev bot.CallEvent) {
		metrics.ObserveCall(ev)
		webhook.LogCall(ctx, a.log, ev)
	})
	a.bot.OnSweep("sweeps", metrics.SweepStep)
	token, err := h.MetricsToken(a.getenv) // config/config.go
	if err != nil {
		return err
	}
	a.mounts["GET /metrics"] = webhook.MetricsHandler(reg, token, a.log)
	a.onRequest = metrics.ObserveRequest

	// Hardening of tool calls: one token bucket per principal for every
	// surface, then Idempotency-Key on write tools.
	// The bucket is the bot's: every tool call takes a token in bot.Call,
	// whatever the surface; the HTTP edge takes it first (ChargeCalls) so
	// that a limited call is answered 429 before any work is done.
	// On PostgreSQL the buckets are in the database, so that replicas
	// share them: a key's limit is the same with one replica or five.
	newLimiter := func(name string, perMinute, burst int) *bot.RateLimiter {
		return bot.NewRateLimiter(perMinute, burst, a.bot.Now)
	}
	if pg, ok := a.db.(*postgres.DB); ok {
		rl := pg.RateLimits()
		newLimiter = func(name string, perMinute, burst int) *bot.RateLimiter {
			return bot.SharedRateLimiter(name, perMinute, burst, a.bot.Now, rl)
		}
		a.bot.OnSweep("rate_limits", rl.Prune)
	}
	a.bot.SetRateLimiter(newLimiter("calls", h.RatePerMinute, h.RateBurst))
	idem := webhook.NewIdempotency(webhook.IdempotencyOptions{
		Store:    a.bot.Store(),
		Now:      a.bot.Now,
		IsWrite:  a.bot.Writes,
		MaxBody:  h.MaxBodyBytes,
		Logger:   a.log,
		OnReplay: metrics.Replayed,
		TTL:      a.cfg.Retention.Idempotency,
	})
	a.bot.OnSweep("idempotency", idem.Prune)
	a.mw = append(a.mw, webhook.ChargeCalls(a.bot, a.log, nil), idem.Middleware)

	// MCP over streamable HTTP: the same keys, principals and tools.
	var mcpHandler http.Handler = mcp.NewHTTPHandler(mcp.HTTPOptions{
		App: a.bot, Version: version, Logger: a.log, CallerFrom: webhook.CallerFrom, MaxBody: h.MaxBodyBytes,
		MaxCallWait: a.cfg.MCP.MaxCallWait, // config/hooks.go
		StateKey:    mcp.StateKey(a.key.Seed()),
		ItemURL:     a.bot.WebLinks().ItemURL,
		Now:         a.bot.Now,
		Upstreams:   a.upstreams,  // wire_gateway.go; its run is set once claimed (setRun)
		Charge:      a.bot.Charge, // tools/call and tasks/*: the handshake takes no tool token
		// The handshake and housekeeping: a bucket of their own, ten times
		// the tool calls', so a client always connects and a flood is cut.
		ChargeProtocol: newLimiter("mcp_protocol", protocolFactor*h.RatePerMinute, protocolFactor*h.RateBurst).Charge,
	})
	// Host and Origin are checked in front of every route (app.handler).
	for _, wrap := range []func(http.Handler) http.Handler{
		webhook.LimitBody(h.MaxBodyBytes, a.log),
		webhook.Authenticate(a.auth, a.log, "mcp"), // keys, and OAuth tokens (wire_oauth.go)
	} {
		mcpHandler = wrap(mcpHandler) // the last wrap runs first
	}
	for _, method := range []string{"POST", "GET", "DELETE"} {
		a.mounts[method+" /mcp"] = mcpHandler
	}
	return nil
}

// protocolFactor is how many MCP protocol messages (initialize, tools/list,
// ping, notifications) a principal may send per tool call it may make.
const protocolFactor = 10
