package memorytools

import (
	"context"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// safetyPolicy applies the call's policy arguments over the defaults.
func (s safetyArgs) policy() policy.SafetyPolicy {
	p := policy.DefaultSafetyPolicy()
	if s.MinConfidence != nil {
		p.MinConfidence = *s.MinConfidence
	}
	if s.RequireActive != nil {
		p.RequireActive = *s.RequireActive
	}
	if s.BlockOnFlagged != nil {
		p.BlockOnFlagged = *s.BlockOnFlagged
	}
	if s.MaxStalenessDays != nil {
		p.MaxStalenessDays = *s.MaxStalenessDays
	}
	if s.BlockOnRecentChangeDays != nil {
		p.BlockOnRecentChangeDays = *s.BlockOnRecentChangeDays
	}
	return p
}

// factState is what the safety gate reads of a fact.
func factState(f *memory.Fact) policy.FactState {
	return policy.FactState{
		ID: f.ID, Subject: f.Subject, Value: f.Value, Status: string(f.Status),
		Confidence: f.Confidence, SetAt: f.SetAt, Supersedes: f.Supersedes,
	}
}

// verdictData is the structured answer of a gate.
type verdictData struct {
	Verdict policy.Verdict `json:"verdict"`
	Reasons []string       `json:"reasons"`
	Subject string         `json:"subject"`
	Facts   []factData     `json:"facts"`
}

func (t *tools) check(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*checkArgs)
	subject := t.o.Resolve(args.Subject).Subject
	pol := args.safetyArgs.policy()
	var (
		facts   []*memory.Fact
		verdict policy.Verdict
		reasons []string
	)
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		if facts, err = memory.Live(tx, c.Space, subject); err != nil {
			return err
		}
		states := make([]policy.FactState, len(facts))
		for i, f := range facts {
			states[i] = factState(f)
		}
		verdict, reasons = policy.CheckBeforeAct(states, pol, c.Now)
		return nil
	})
	if err != nil {
		return bot.Result{}, err
	}
	// The verdict is audited before it is given (durably, or queued: see
	// bot.ReadAudit); a verdict that cannot be recorded is never given.
	if err := c.AuditRead(ctx, "check_before_act", subject+": "+string(verdict)); err != nil {
		reason, ok := bot.Unrecorded(err)
		if !ok {
			return bot.Result{}, err
		}
		verdict, reasons, facts = policy.VerdictBlocked, []string{reason}, nil
	}
	var current []string
	for _, f := range facts {
		if f.Status == memory.StatusActive {
			current = append(current, f.Subject+" = "+memory.EscapeBreaks(f.Value))
		}
	}
	if reasons == nil {
		reasons = []string{}
	}
	return bot.Result{
		Text: policy.RenderCheck(subject, verdict, reasons, current),
		Data: verdictData{Verdict: verdict, Reasons: reasons, Subject: subject, Facts: factsData(facts)},
	}, nil
}

// safeRecallData is the structured answer of safe_recall.
type safeRecallData struct {
	Verdict policy.Verdict `json:"verdict"`
	Reasons []string       `json:"reasons"`
	recallData
}

func (t *tools) safeRecall(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*safeRecallArgs)
	pol := args.safetyArgs.policy()
	var (
		verdict policy.Verdict
		reasons []string
	)
	judge := func(r memory.Recall) policy.Verdict {
		states := make([]policy.FactState, len(r.Facts))
		for i, x := range r.Facts {
			states[i] = factState(x.Fact)
		}
		verdict, reasons = policy.SafeRecall(states, r.FlaggedSubjects, pol, c.Now)
		return verdict
	}
	r, err := t.runRecall(ctx, c, "safe_recall", args.Question, args.CriticalCategories, nil, judge)
	if reason, ok := bot.Unrecorded(err); ok {
		// A verdict that cannot be recorded is never given: withhold, and
		// show none of the facts read.
		reasons = []string{reason}
		d := safeRecallData{Verdict: policy.VerdictWithheld, Reasons: reasons, recallData: toRecallData(memory.Recall{})}
		return bot.Result{Text: policy.RenderWithheld(reasons), Data: d}, nil
	}
	if err != nil {
		return bot.Result{}, err
	}
	d := safeRecallData{Verdict: verdict, Reasons: reasons, recallData: toRecallData(r)}
	if reasons == nil {
		d.Reasons = []string{}
	}
	text := memory.RenderRecall(r)
	if verdict == policy.VerdictWithheld {
		text = policy.RenderWithheld(reasons)
	}
	return bot.Result{Text: text, Data: d}, nil
}
