//go:build unix

package bot

import (
	"context"
	"crypto/ed25519"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// nopStore is a store the benchmarked call never reaches.
type nopStore struct{}

func (nopStore) Update(context.Context, func(kv.Tx) error) error { return nil }
func (nopStore) View(context.Context, func(kv.Tx) error) error   { return nil }

// BenchmarkCallPath is bot.Call of a tool that does nothing, tracing off:
// the call path's own cost (registry, capability, strict decoding,
// observer), where a span would be made when tracing is on. cpu-ns/op is
// the process's CPU per call: on a shared machine steadier than ns/op.
func BenchmarkCallPath(b *testing.B) {
	bt, err := New(Options{Store: nopStore{}, SigningKey: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))})
	if err != nil {
		b.Fatal(err)
	}
	err = bt.Register(Tool{Name: "noop", Capability: policy.CapRead, Args: struct {
		Subject string `json:"subject"`
	}{}, Handler: func(context.Context, *Call, any) (Result, error) { return Result{}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	caller := &Caller{Principal: Principal{ID: "p", Name: "a", Role: policy.RoleAgent}, Surface: "http"}
	args := []byte(`{"subject":"allergy"}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	for b.Loop() {
		if _, err := bt.Call(ctx, caller, "noop", args); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's CPU time so far (user and system): on a
// shared machine a steadier figure than the time per call.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
