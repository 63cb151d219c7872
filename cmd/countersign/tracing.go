package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/countersign/countersign/adapters/tracing"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/kv"
)

// flushGrace bounds how long a stopping process waits for its last spans
// to reach the collector.
const flushGrace = 5 * time.Second

// startTracing turns OpenTelemetry traces on when the environment asks for
// them (the standard OTEL_* variables: adapters/tracing.FromEnv), before
// the bot is built: log lines then carry trace_id and span_id, and the
// spans still batched are exported when the app closes (after serve's
// loops have stopped). Off, it leaves everything as it was: no exporter,
// no goroutine, no decorator.
func (a *app) startTracing(ctx context.Context) error {
	tr, err := tracing.FromEnv(ctx, a.getenv, tracing.Options{Service: "countersign", Version: version, Logger: a.log})
	if err != nil || tr == nil {
		return err
	}
	a.tracing = tr
	a.log = slog.New(tr.LogHandler(a.log.Handler()))
	a.closers = append(a.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), flushGrace)
		defer cancel()
		return tr.Shutdown(ctx)
	})
	a.log.Info("traces: exporting spans over OTLP/HTTP (OTEL_* environment variables; docs/operations.md)")
	return nil
}

// tracedStore is the store the bot writes through: db itself, or db with a
// span per transaction when tracing is on.
func (a *app) tracedStore(db kv.Store) kv.Store {
	engine := "bbolt"
	if a.cfg.Store.Engine == config.EnginePostgres {
		engine = "postgresql"
	}
	return a.tracing.Store(db, engine)
}

// chatTransport is the HTTP transport of a chat platform's API (platform
// "discord"), with a span per call; nil when tracing is off (the adapter's
// own default).
func (a *app) chatTransport(platform string) http.RoundTripper {
	if a.tracing == nil {
		return nil
	}
	return a.tracing.Transport(platform, nil)
}
