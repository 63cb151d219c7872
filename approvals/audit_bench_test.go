package approvals

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
)

// BenchmarkEntrySignature is what a per-row signature costs: one Ed25519
// signature of an entry's message.
func BenchmarkEntrySignature(b *testing.B) {
	key := testKey(1)
	e := Entry{Seq: 1, TS: "2026-09-26T12:20:13Z", Principal: "ward_bot [prin_1]", UserID: "patient_42", Action: "check_before_act", Detail: "active_medication: SAFE", PrevHash: Genesis}
	e.Hash = e.ComputeHash()
	msg := entryMessage(e.Hash)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		ed25519.Sign(key, msg)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkEntryVerify is what checking a per-row signature costs.
func BenchmarkEntryVerify(b *testing.B) {
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	msg := entryMessage(Genesis)
	sig := ed25519.Sign(key, msg)
	for b.Loop() {
		ed25519.Verify(pub, msg, sig)
	}
}

// BenchmarkAppend is the cost of appending n entries in one commit (as
// group commit batches them under load), fsyncs included; ns/entry is the
// figure to compare.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("per_commit=%d", n), func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "a.db"), bolt.Options{Sequential: SequentialBuckets()})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			key := testKey(1)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				err := db.Update(context.Background(), func(tx kv.Tx) error {
					for j := 0; j < n; j++ {
						if _, err := Append(tx, key, t0, Entry{Principal: "ward_bot [prin_1]", UserID: "patient_42", Action: "check_before_act", Detail: "active_medication: SAFE"}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
			// CPU time is the figure that holds on a busy machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/entry")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
