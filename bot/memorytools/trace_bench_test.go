//go:build unix

package memorytools

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkCheckBeforeAct is the gate as an agent calls it, in process:
// bot.Call of check_before_act on a subject with 10 live facts, the store
// and the read audit as serve sets them (group commit, queued verdicts).
// traces=off is the bot without Options.Tracing (what the hot path costs
// when OTEL_* is unset); traces=on records every span (a batcher with an
// exporter that drops them), the call under a request's span, as the HTTP
// edge makes it. The read audit's appender shares the cores, so the time
// per call is mostly waiting for its commits; cpu-µs/op (the process's CPU,
// appender included, per call) is the steadier figure.
//
//	go test -run '^$' -bench CheckBeforeAct -benchmem ./bot/memorytools
func BenchmarkCheckBeforeAct(b *testing.B) {
	b.Run("traces=off", func(b *testing.B) { benchCheck(b, nil) })
	b.Run("traces=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		benchCheck(b, tp)
	})
}

func benchCheck(b *testing.B, tp *sdktrace.TracerProvider) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "gate.db"), bolt.Options{GroupCommit: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	o := bot.Options{Store: db, SigningKey: bottest.SigningKey()}
	if tp != nil {
		o.Tracing = tp
	}
	bt, err := bot.New(o)
	if err != nil {
		b.Fatal(err)
	}
	schema, err := memory.NewSchema([]memory.Slot{{Name: "allergy", Category: "allergy", Verbatim: true, Multi: true}})
	if err != nil {
		b.Fatal(err)
	}
	if err := Register(bt, memory.Options{Schema: schema, CriticalCategories: []string{"allergy"}}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	agent := &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "ward_bot", Role: policy.RoleAgent}, Surface: "http"}
	for i := range 10 {
		if _, err := bt.Call(ctx, agent, "remember", fmt.Appendf(nil, `{"subject":"allergy","value":"allergen-%02d","confidence":1}`, i)); err != nil {
			b.Fatal(err)
		}
	}
	q, err := bt.StartReadAudit(ctx, bot.ReadAuditOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close(context.Background()) })
	args := []byte(`{"subject":"allergy","max_staleness_days":365}`)
	var span trace.Span
	if tp != nil {
		ctx, span = tp.Tracer("bench").Start(bot.WithRequestID(ctx, "0123456789abcdef"), "POST /v1/tools/{name}")
		defer span.End()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	for b.Loop() {
		if _, err := bt.Call(ctx, agent, "check_before_act", args); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

// processCPU is the process's CPU time so far (user and system).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
