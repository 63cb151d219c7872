package memorytools

import (
	"context"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// policyData is the structured form of a reconcile policy.
type policyData struct {
	Mode      policy.ReconcileMode `json:"mode"`
	Authority []policy.SourceRank  `json:"authority"`
	Default   bool                 `json:"default"` // no policy was ever set for the space
}

func (t *tools) setPolicy(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*setPolicyArgs)
	mode := policy.ModeRecency
	if args.Mode != "" {
		m, err := policy.ParseReconcileMode(args.Mode)
		if err != nil {
			return bot.Result{}, bot.Invalid("mode", "%s", err.Error())
		}
		mode = m
	}
	p := policy.ReconcilePolicy{Mode: mode}
	for src, rank := range args.Authority {
		p.Authority = append(p.Authority, policy.SourceRank{Source: src, Rank: rank})
	}
	policy.SortRanks(p.Authority)
	err := c.Update(ctx, func(tx *bot.Tx) error {
		if err := memory.SavePolicy(tx, c.Space, p, c.Caller.String()); err != nil {
			return err
		}
		detail := "mode=" + string(p.Mode)
		if len(p.Authority) > 0 {
			detail += " authority=" + policy.FormatRanks(p.Authority)
		}
		return tx.Audit("set_reconcile_policy", detail)
	})
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{Text: p.DescribeSet(), Data: toPolicyData(p, true)}, nil
}

func toPolicyData(p policy.ReconcilePolicy, set bool) policyData {
	d := policyData{Mode: p.Mode, Authority: p.Authority, Default: !set}
	if d.Authority == nil {
		d.Authority = []policy.SourceRank{}
	}
	return d
}

func (t *tools) getPolicy(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	var (
		p   policy.ReconcilePolicy
		set bool
	)
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		p, set, err = memory.LoadPolicy(tx, c.Space)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{Text: p.DescribeGet(set), Data: toPolicyData(p, set)}, nil
}
