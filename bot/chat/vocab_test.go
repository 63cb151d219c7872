package chat

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

func TestWithChanges(t *testing.T) {
	c := &bot.Changes{By: "alice [prin_a]", Diff: []bot.Change{{Field: "dose", From: "5mg", To: "2.5mg"}}}
	tests := []struct {
		status string
		want   string
	}{
		{"approved", "approved with changes by alice [prin_a]: dose 5mg → 2.5mg"},
		{"pending", "changed before approval by alice [prin_a]: dose 5mg → 2.5mg"},
		{"denied", "changed by alice [prin_a]: dose 5mg → 2.5mg"},
	}
	for _, tt := range tests {
		if got := WithChanges(bot.Item{Status: tt.status, Changes: c}); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.status, got, tt.want)
		}
	}
	if got := WithChanges(bot.Item{Status: "approved"}); got != "" {
		t.Errorf("unedited: %q, want \"\"", got)
	}
	// Untrusted text is cleaned: no line break or bidi control reaches a card.
	evil := &bot.Changes{By: "mallory\u202e [x]\n@here", Diff: []bot.Change{{Field: "f", From: "a", To: "b"}}}
	if got := WithChanges(bot.Item{Status: "approved", Changes: evil}); strings.ContainsAny(got, "\n\u202e") || got != "approved with changes by mallory [x] @here: f a → b" {
		t.Errorf("sanitised: %q, want %q", got, "approved with changes by mallory [x] @here: f a → b")
	}
}
