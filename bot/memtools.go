package bot

import "github.com/countersign/countersign/memory"

// RegisterMemory registers the memory, gate, memory-approval and
// reconciliation tools.
func RegisterMemory(b *Bot, o memory.Options) error {
	return nil
}
