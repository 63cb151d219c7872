package memory

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// The read-path benchmarks mirror bench/ (G1 and R1) in process, on the
// same data shapes, so the memory package can be profiled alone:
//
//	go test -run '^$' -bench 'Gate|RecallBench' -benchmem ./memory/

// benchStore opens a bbolt file and fills it through Write, n facts per
// transaction, with fill(i) giving the space and input of the i-th fact.
func benchStore(b *testing.B, n int, fill func(i int) (Space, Input)) *bolt.DB {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "m.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	o := Options{}.WithDefaults()
	const perTx = 5000
	for start := 0; start < n; start += perTx {
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			for i := start; i < min(start+perTx, n); i++ {
				sp, in := fill(i)
				if in.Op == 0 {
					in.Op = OpRemember
				}
				in.Confidence, in.Kind = DefaultConfidence, KindState
				if _, err := o.Write(tx, sp, in, t0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// benchValue is bench/'s remember value: about 100 bytes, 2 in 3 facts
// sharing most of their words with benchQuestion.
func benchValue(i int) string {
	if i%3 == 0 {
		return fmt.Sprintf("dose %d mg at night; tolerates it well", i)
	}
	return fmt.Sprintf("observation %d of writer 0: blood pressure 120/80, heart rate 72, no acute distress, follow-up in two weeks", i)
}

const benchQuestion = "what is the blood pressure and heart rate at follow-up"

func benchRecall(b *testing.B, db *bolt.DB, space func(i int) Space) {
	req := RecallRequest{Question: benchQuestion, Critical: map[string]bool{"allergy": true, "active_medication": true}, Context: 40, Budget: 200}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		sp := space(i)
		i++
		err := db.View(context.Background(), func(tx kv.Tx) error {
			r, err := RecallSpace(tx, sp, req)
			if err == nil && len(r.Facts) == 0 {
				return fmt.Errorf("recall in %s found nothing", sp)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecallBenchSpace10k is R1's ranking: one space of 10,000 facts.
func BenchmarkRecallBenchSpace10k(b *testing.B) {
	sp := Space{UserID: "big"}
	db := benchStore(b, 10000, func(i int) (Space, Input) {
		return sp, Input{Subject: fmt.Sprintf("note_%07d", i), Value: benchValue(i), Said: "the nurse recorded it at the bedside"}
	})
	benchRecall(b, db, func(int) Space { return sp })
}

// BenchmarkRecallBenchAgent is R1's second case, scaled down: one agent's
// 100 facts among 100,000 (1,000 agents), agents taken in turn.
func BenchmarkRecallBenchAgent(b *testing.B) {
	const agents, per = 1000, 100
	db := benchStore(b, agents*per, func(i int) (Space, Input) {
		a, k := i%agents, i/agents
		return Space{UserID: "default", AgentID: fmt.Sprintf("a%05d", a)},
			Input{Subject: fmt.Sprintf("note_%07d", k), Value: benchValue(k + 1), Said: "the nurse recorded it at the bedside"}
	})
	benchRecall(b, db, func(i int) Space { return Space{UserID: "default", AgentID: fmt.Sprintf("a%05d", (i*7919)%agents)} })
}

// BenchmarkGateDecision is G1's decision: the subject's 10 live facts (and
// 100 other facts in the space) and the verdict.
func BenchmarkGateDecision(b *testing.B) {
	sp := Space{UserID: "default"}
	db := benchStore(b, 110, func(i int) (Space, Input) {
		if i < 10 {
			return sp, Input{Subject: "allergy", Value: fmt.Sprintf("allergen-%02d", i), Said: "patient reports it"}
		}
		return sp, Input{Subject: fmt.Sprintf("note_%03d", i), Value: fmt.Sprintf("value %d", i)}
	})
	// allergy is not declared multi here, so write the list directly.
	err := db.Update(context.Background(), func(tx kv.Tx) error {
		for i := 1; i < 10; i++ {
			id, err := nextID(tx, sp)
			if err != nil {
				return err
			}
			f := &Fact{ID: id, Space: sp, Subject: "allergy", Value: fmt.Sprintf("allergen-x%02d", i), Scope: DefaultScope,
				Kind: KindState, Status: StatusActive, Confidence: DefaultConfidence, Said: "patient reports it", SetAt: t0, SetBy: "bench [b]"}
			if err := put(tx, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	pol := policy.DefaultSafetyPolicy()
	pol.MaxStalenessDays = 365
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		err := db.View(context.Background(), func(tx kv.Tx) error {
			facts, err := Live(tx, sp, "allergy")
			if err != nil {
				return err
			}
			if len(facts) != 10 {
				return fmt.Errorf("Live(allergy) = %d facts, want 10", len(facts))
			}
			states := make([]policy.FactState, len(facts))
			for i, f := range facts {
				states[i] = policy.FactState{ID: f.ID, Subject: f.Subject, Value: f.Value, Status: string(f.Status),
					Confidence: f.Confidence, SetAt: f.SetAt, Supersedes: f.Supersedes}
			}
			policy.CheckBeforeAct(states, pol, t0)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRememberWrite is the CPU cost of one remember's Write in a
// space of 10,000 facts (100 writes per transaction, so the commit is
// shared): what the recall index adds to the write path.
func BenchmarkRememberWrite(b *testing.B) {
	sp := Space{UserID: "big"}
	db := benchStore(b, 10000, func(i int) (Space, Input) {
		return sp, Input{Subject: fmt.Sprintf("note_%07d", i), Value: benchValue(i), Said: "the nurse recorded it at the bedside"}
	})
	o := Options{}.WithDefaults()
	b.ReportAllocs()
	b.ResetTimer()
	i := 10000
	for b.Loop() {
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			for range 100 {
				in := Input{Op: OpRemember, Subject: fmt.Sprintf("note_%07d", i), Value: benchValue(i), Said: "the nurse recorded it at the bedside",
					Confidence: DefaultConfidence, Kind: KindState}
				i++
				if _, err := o.Write(tx, sp, in, t0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRememberWriteSmall is the CPU cost of one remember's Write in
// one of 1,000 spaces of up to 100 facts each (M1's shape), 100 writes per
// transaction.
func BenchmarkRememberWriteSmall(b *testing.B) {
	db := benchStore(b, 1, func(int) (Space, Input) {
		return Space{UserID: "x"}, Input{Subject: "x", Value: "x"}
	})
	o := Options{}.WithDefaults()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			for range 100 {
				a, k := i%1000, (i/1000)%100
				sp := Space{UserID: "default", AgentID: fmt.Sprintf("a%05d", a)}
				in := Input{Op: OpRemember, Subject: fmt.Sprintf("note_%07d_%d", k, i), Value: benchValue(i), Said: "the nurse recorded it at the bedside",
					Confidence: DefaultConfidence, Kind: KindState}
				i++
				if _, err := o.Write(tx, sp, in, t0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
