package bench

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// gatePolicy is check_before_act's rule set (policy.CheckBeforeAct) in
// Rego: the same reasons, each listed once, over the same facts.
const gatePolicy = `package countersign

import rego.v1

facts := object.get(data.facts, input.subject, [])

has_active if {
	some f in facts
	f.status == "ACTIVE"
}

current contains f if {
	some f in facts
	f.status != "FLAGGED_CONFLICT"
}

age_days(f) := max([0, input.now_ns - f.set_at_ns]) / 86400000000000

reasons contains "no active fact for this subject — nothing safe to act on" if not has_active

reasons contains "unresolved conflict (FLAGGED) — the value is disputed" if {
	input.policy.block_on_flagged
	some f in facts
	f.status == "FLAGGED_CONFLICT"
}

reasons contains sprintf("not current (status %s) — acting on a retired value", [f.status]) if {
	input.policy.require_active
	some f in current
	f.status != "ACTIVE"
}

reasons contains sprintf("confidence %v < required %v", [f.confidence, input.policy.min_confidence]) if {
	some f in current
	f.confidence < input.policy.min_confidence
}

reasons contains sprintf("stale: last set %vd ago > %vd limit", [floor(age), lim]) if {
	lim := input.policy.max_staleness_days
	lim > 0
	some f in current
	age := age_days(f)
	age > lim
}

reasons contains sprintf("recently changed %vd ago — may be unsettled", [round(age * 100) / 100]) if {
	lim := input.policy.block_on_recent_change_days
	lim > 0
	some f in current
	f.supersedes != 0
	age := age_days(f)
	age < lim
}

verdict := "SAFE" if count(reasons) == 0

verdict := "BLOCKED" if count(reasons) > 0

decision := {"verdict": verdict, "reasons": reasons}
`

// gateSubject is the subject checked: a list slot holding gateFacts facts.
const (
	gateSubject = "allergy"
	gateFacts   = 10
	gateOthers  = 100 // other facts in the same space
)

// Gate is the G1 set-up: one space holding a subject with 10 active facts
// (and 100 others), the OPA query prepared over the same facts.
type Gate struct {
	env   *Env
	sp    memory.Space
	opa   rego.PreparedEvalQuery
	pol   policy.SafetyPolicy
	key   ed25519.PrivateKey
	check map[string]any
}

// NewGate fills env's default space and prepares OPA.
func NewGate(ctx context.Context, env *Env) (*Gate, error) {
	for i := 0; i < gateFacts; i++ {
		if _, err := env.MustCall(ctx, env.Agent, "remember", map[string]any{
			"subject": gateSubject, "value": fmt.Sprintf("allergen-%02d", i), "text": "patient reports it",
		}); err != nil {
			return nil, err
		}
	}
	for i := 0; i < gateOthers; i++ {
		if _, err := env.MustCall(ctx, env.Agent, "remember", map[string]any{
			"subject": fmt.Sprintf("note_%03d", i), "value": fmt.Sprintf("value %d", i),
		}); err != nil {
			return nil, err
		}
	}
	g := &Gate{env: env, sp: memory.Space{UserID: "default"}}
	g.pol = policy.DefaultSafetyPolicy()
	g.pol.MaxStalenessDays = 365
	g.check = map[string]any{"subject": gateSubject, "max_staleness_days": 365}
	_, g.key, _ = ed25519.GenerateKey(nil)
	// OPA's data: every live fact of the space, by subject.
	bySubject := map[string]any{}
	err := env.DB.View(ctx, func(tx kv.Tx) error {
		return memory.LiveAll(tx, g.sp, func(f *memory.Fact) error {
			l, _ := bySubject[f.Subject].([]any)
			bySubject[f.Subject] = append(l, map[string]any{
				"id": f.ID, "value": f.Value, "status": string(f.Status), "confidence": f.Confidence,
				"set_at_ns": f.SetAt.UnixNano(), "supersedes": f.Supersedes,
			})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if n := len(bySubject[gateSubject].([]any)); n != gateFacts {
		return nil, fmt.Errorf("the subject holds %d live facts, want %d", n, gateFacts)
	}
	store := inmem.NewFromObjectWithOpts(map[string]any{"facts": bySubject}, inmem.OptReturnASTValuesOnRead(true))
	g.opa, err = rego.New(
		rego.Query("data.countersign.decision"),
		rego.Module("countersign.rego", gatePolicy),
		rego.Store(store),
		rego.StoreReadAST(true),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	// Both engines must agree, on a SAFE and on a BLOCKED case.
	for _, minConf := range []float64{0.7, 0.99} {
		p := g.pol
		p.MinConfidence = minConf
		cv, cr, err := g.decide(ctx, p)
		if err != nil {
			return nil, err
		}
		ov, or, err := g.opaDecide(ctx, p)
		if err != nil {
			return nil, err
		}
		if string(cv) != ov || len(cr) != or {
			return nil, fmt.Errorf("OPA and Countersign disagree at min_confidence %v: %s/%d reasons vs %s/%d", minConf, cv, len(cr), ov, or)
		}
	}
	return g, nil
}

// decide is the gate's decision as the tool computes it: a read
// transaction, the subject's live facts, the verdict. No audit entry.
func (g *Gate) decide(ctx context.Context, p policy.SafetyPolicy) (policy.Verdict, []string, error) {
	var v policy.Verdict
	var reasons []string
	now := time.Now()
	err := g.env.DB.View(ctx, func(tx kv.Tx) error {
		facts, err := memory.Live(tx, g.sp, gateSubject)
		if err != nil {
			return err
		}
		v, reasons = policy.CheckBeforeAct(states(facts), p, now)
		return nil
	})
	return v, reasons, err
}

func states(facts []*memory.Fact) []policy.FactState {
	out := make([]policy.FactState, len(facts))
	for i, f := range facts {
		out[i] = policy.FactState{ID: f.ID, Subject: f.Subject, Value: f.Value, Status: string(f.Status),
			Confidence: f.Confidence, SetAt: f.SetAt, Supersedes: f.Supersedes}
	}
	return out
}

var errRollback = errors.New("rollback")

// rollbackHook is a PreCommit that rolls its transaction back; registered
// after the audit chain's, it runs after the signing.
type rollbackHook struct{}

func (rollbackHook) BeforeCommit(kv.Tx) error { return errRollback }

// decideAndAudit is decide plus the audit entry the tool appends, in a
// write transaction that is rolled back after the entry and the head are
// signed (the store signs at commit): the CPU cost of the tool call without
// its fsync.
func (g *Gate) decideAndAudit(ctx context.Context) error {
	now := time.Now()
	err := g.env.DB.Update(ctx, func(tx kv.Tx) error {
		facts, err := memory.Live(tx, g.sp, gateSubject)
		if err != nil {
			return err
		}
		v, _ := policy.CheckBeforeAct(states(facts), g.pol, now)
		if _, err := approvals.Append(tx, g.key, now, approvals.Entry{Principal: "bench-agent [prin_agent]", UserID: "default",
			Action: "check_before_act", Detail: gateSubject + ": " + string(v)}); err != nil {
			return err
		}
		if _, ok := kv.Finally(tx, "bench.rollback", func() kv.PreCommit { return rollbackHook{} }); !ok {
			return errRollback // a store that signs at once: already signed
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

func (g *Gate) opaDecide(ctx context.Context, p policy.SafetyPolicy) (string, int, error) {
	rs, err := g.opa.Eval(ctx, rego.EvalInput(map[string]any{
		"subject": gateSubject,
		"now_ns":  time.Now().UnixNano(),
		"policy": map[string]any{
			"min_confidence": p.MinConfidence, "require_active": p.RequireActive, "block_on_flagged": p.BlockOnFlagged,
			"max_staleness_days": p.MaxStalenessDays, "block_on_recent_change_days": p.BlockOnRecentChangeDays,
		},
	}))
	if err != nil {
		return "", 0, err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return "", 0, fmt.Errorf("OPA returned %d results", len(rs))
	}
	d, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return "", 0, fmt.Errorf("OPA returned %T", rs[0].Expressions[0].Value)
	}
	v, _ := d["verdict"].(string)
	r, _ := d["reasons"].([]any)
	return v, len(r), nil
}

// RunG1 measures one round: n decisions by each engine, interleaved one
// by one so both see the same machine; calls full tool calls (durable);
// and the tool's CPU cost without the fsync.
func (g *Gate) RunG1(ctx context.Context, res *Results, n, calls int) error {
	cs, opa, audit, call := &Sample{}, &Sample{}, &Sample{}, &Sample{}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, _, err := g.decide(ctx, g.pol); err != nil {
			return err
		}
		t1 := time.Now()
		if _, _, err := g.opaDecide(ctx, g.pol); err != nil {
			return err
		}
		t2 := time.Now()
		cs.Add(t1.Sub(t0))
		opa.Add(t2.Sub(t1))
	}
	// The decision alone, back to back: its tail without OPA's garbage
	// between calls, with the collections it causes counted.
	alone := &Sample{}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, _, err := g.decide(ctx, g.pol); err != nil {
			return err
		}
		alone.Add(time.Since(t0))
	}
	runtime.ReadMemStats(&m1)
	res.PutSample("G1.alone", alone)
	res.Put("G1.alone.gcs", float64(m1.NumGC-m0.NumGC))
	res.Put("G1.alone.bytes", float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n))
	for i := 0; i < calls; i++ {
		t0 := time.Now()
		if err := g.decideAndAudit(ctx); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := g.env.MustCall(ctx, g.env.Agent, "check_before_act", g.check); err != nil {
			return err
		}
		t2 := time.Now()
		audit.Add(t1.Sub(t0))
		call.Add(t2.Sub(t1))
	}
	res.PutSample("G1.cs", cs)
	res.PutSample("G1.opa", opa)
	res.PutSample("G1.nofsync", audit)
	res.PutSample("G1.call", call)
	res.Put("G1.ratio.p50", opa.Quantile(0.5).Seconds()/cs.Quantile(0.5).Seconds())
	res.Put("G1.ratio.p99", opa.Quantile(0.99).Seconds()/cs.Quantile(0.99).Seconds())
	return nil
}
