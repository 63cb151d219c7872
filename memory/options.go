package memory

import "time"

// Options configure the memory tools. Zero values take the documented
// defaults (critical budget 200, recall context 40).
type Options struct {
	Schema             *Schema
	CriticalCategories []string // case-insensitive
	CriticalBudget     int
	RecallContext      int
	TrustedSources     []string // case-insensitive
	// ProposalMaxAge closes a proposal left undecided this long (0: never).
	ProposalMaxAge time.Duration
	// ProposalRetention deletes a proposal closed without being applied
	// (rejected, stale, expired) this long after it closed (0: kept).
	ProposalRetention time.Duration
}
