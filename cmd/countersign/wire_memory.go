package main

import (
	"context"

	"github.com/countersign/countersign/bot/memorytools"
	"github.com/countersign/countersign/memory"
)

// wireMemory registers the memory, gate and memory-approval tools.
func (a *app) wireMemory(ctx context.Context) error {
	m := a.cfg.Memory
	return memorytools.Register(a.bot, memory.Options{
		Schema:             a.cfg.Schema(),
		CriticalCategories: m.CriticalCategories,
		CriticalBudget:     m.CriticalBudget,
		RecallContext:      m.RecallContext,
		TrustedSources:     m.TrustedSources,
		ProposalMaxAge:     m.ProposalMaxAge,
		ProposalRetention:  a.cfg.Retention.MemoryProposals,
	})
}
