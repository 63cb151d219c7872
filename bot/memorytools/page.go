package memorytools

import (
	"fmt"
	"strconv"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
)

// Paging of the listing tools (list_memories, history, pending_changes):
// every answer is bounded, and next_cursor says where the next page starts.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 500
)

// pageArgs are the paging arguments of a listing tool.
type pageArgs struct {
	Limit  *int   `json:"limit,omitempty" jsonschema:"at most this many items (default 100, at most 500)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"where to continue: the next_cursor of the previous page (omit for the first page)"`
}

// validate checks the limit and the cursor.
func (p pageArgs) validate() error {
	if p.Limit != nil && (*p.Limit < 1 || *p.Limit > MaxPageLimit) {
		return bot.Invalid("limit", "must be between 1 and %d (default %d)", MaxPageLimit, DefaultPageLimit)
	}
	if _, err := p.after(); err != nil {
		return err
	}
	return nil
}

// limit returns the page size.
func (p pageArgs) limit() int {
	if p.Limit == nil {
		return DefaultPageLimit
	}
	return *p.Limit
}

// after returns the memory id the page starts after (0: the first page).
func (p pageArgs) after() (uint64, error) {
	if p.Cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(p.Cursor, 10, 64)
	if err != nil || n == 0 {
		return 0, bot.Invalid("cursor", "must be the next_cursor of a previous answer (a memory id such as \"42\"), or omitted for the first page")
	}
	return n, nil
}

// pageFacts returns the facts (sorted by id) with an id after the cursor,
// at most limit of them, and the cursor of the next page ("" when this is
// the last).
func pageFacts(facts []*memory.Fact, after uint64, limit int) ([]*memory.Fact, string) {
	i := 0
	for i < len(facts) && facts[i].ID <= after {
		i++
	}
	facts = facts[i:]
	if len(facts) <= limit {
		return facts, ""
	}
	facts = facts[:limit]
	return facts, strconv.FormatUint(facts[len(facts)-1].ID, 10)
}

// moreLine is the line a truncated listing ends with.
func moreLine(tool, cursor string) string {
	if cursor == "" {
		return ""
	}
	return fmt.Sprintf("\n… more: call %s again with cursor \"%s\".", tool, cursor)
}
