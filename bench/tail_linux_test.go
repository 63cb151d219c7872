package bench

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkGateTail attributes G1's slow decisions (over 20 µs) to what
// they waited on, decision by decision: the thread was switched out by
// the kernel (an involuntary context switch: other processes), a
// collection finished or a mark assist ran during the decision (GC), the
// thread took minor page faults (heap or mapped pages touched for the first
// time), or none of these (the thread was
// running: its CPU time is reported). The collector is set as serve sets
// it (GOGC=400) unless GOGC is in the environment:
//
//	go test -run '^$' -bench GateTail -benchtime 20000x ./bench   (Linux)
func BenchmarkGateTail(b *testing.B) {
	g := newGate(b)
	ctx := context.Background()
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400)) // as serve runs
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The heap's first growth to its GOGC size is a page fault per page
	// first touched (about 1,200 in 20,000 decisions from a fresh heap at
	// GOGC=400, none of them in bbolt's mapping): a cost of a process's
	// first seconds, so the heap is grown before any decision is timed.
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	for n0 := m.NumGC; m.NumGC < n0+3; runtime.ReadMemStats(&m) {
		for i := 0; i < 100; i++ {
			if _, _, err := g.decide(ctx, g.pol); err != nil {
				b.Fatal(err)
			}
		}
	}
	ms := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}}
	var slow, preempted, gc, faulted, running int
	var runningCPU time.Duration
	all := &Sample{}
	for b.Loop() {
		sw0, flt0 := threadRusage()
		metrics.Read(ms)
		gc0, as0 := ms[0].Value.Uint64(), ms[1].Value.Float64()
		cpu0 := threadCPU()
		t0 := time.Now()
		if _, _, err := g.decide(ctx, g.pol); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		cpu := threadCPU() - cpu0
		metrics.Read(ms)
		sw1, flt1 := threadRusage()
		all.Add(d)
		if d <= 20*time.Microsecond {
			continue
		}
		slow++
		switch {
		case sw1 > sw0:
			preempted++
		case ms[0].Value.Uint64() > gc0 || ms[1].Value.Float64() > as0:
			gc++
		case flt1 > flt0:
			faulted++
		default:
			running++
			runningCPU += cpu
		}
	}
	b.ReportMetric(float64(all.Quantile(0.5).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(all.Quantile(0.99).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(slow), "slow")
	b.ReportMetric(float64(preempted), "slow-preempted")
	b.ReportMetric(float64(gc), "slow-gc")
	b.ReportMetric(float64(faulted), "slow-pagefault")
	b.ReportMetric(float64(running), "slow-running")
	if running > 0 {
		b.ReportMetric(float64(runningCPU.Nanoseconds())/float64(running), "slow-running-cpu-ns")
	}
}

// threadRusage returns the calling thread's involuntary context switches
// and minor page faults.
func threadRusage() (nivcsw, minflt int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return ru.Nivcsw, ru.Minflt
}

// threadCPU returns the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}
