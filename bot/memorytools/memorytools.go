// Package memorytools registers the memory, safety-gate, memory-approval and
// reconciliation tools on a bot.
package memorytools

import (
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
)

// Register adds the memory tools to b.
func Register(b *bot.Bot, o memory.Options) error {
	return nil
}
