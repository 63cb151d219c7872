package bench

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func newGate(tb testing.TB) *Gate {
	tb.Helper()
	env, err := NewEnv(filepath.Join(tb.TempDir(), "g1.db"), EnvOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { env.Close() })
	g, err := NewGate(context.Background(), env)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// BenchmarkGateCountersign is G1's decision: read the subject's facts and
// compute the verdict (go test -bench Gate, beside BenchmarkGateOPA).
func BenchmarkGateCountersign(b *testing.B) {
	g := newGate(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := g.decide(ctx, g.pol); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateOPA is the same decision by OPA's prepared query.
func BenchmarkGateOPA(b *testing.B) {
	g := newGate(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := g.opaDecide(ctx, g.pol); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateCountersignWithAudit adds the audit entry, in a transaction
// rolled back before its fsync.
func BenchmarkGateCountersignWithAudit(b *testing.B) {
	g := newGate(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := g.decideAndAudit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRememberGroupCommit is W2's remember with many writers (b.SetParallelism),
// durable, group commit on: go test -bench RememberGroupCommit -cpuprofile cpu.out.
func BenchmarkRememberGroupCommit(b *testing.B) {
	env, err := NewEnv(filepath.Join(b.TempDir(), "w2.db"), EnvOptions{GroupCommit: true})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := env.MustCall(ctx, env.Agent, "remember", rememberArgs(0, int(n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
