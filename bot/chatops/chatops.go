// Package chatops runs the chat commands (/countersign pending, show,
// approve, reject, history, check, help) behind the deterministic scope gate.
package chatops

import (
	"context"

	"github.com/countersign/countersign/bot"
)

// Reply is the answer to a chat command.
type Reply struct {
	Text    string // plain text; the adapter escapes it for its surface
	Private bool   // show only to the user who typed the command
}

// Run executes one chat command typed by a chat user. caller is the
// principal the chat user is mapped to, or nil if unmapped. surface is
// "slack" or "discord"; chatUserID is the platform user id.
func Run(ctx context.Context, b *bot.Bot, caller *bot.Caller, surface, chatUserID, text string) Reply {
	return Reply{Text: "not implemented yet", Private: true}
}
