package main

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/bot"
)

// wireChat builds the directory of people (who a chat user, a console
// sign-in or a directory user is: bot.Directory) from principals: in the
// configuration. The chat commands themselves are run by the Slack and
// Discord adapters through package chat (bot/chat). A directory that
// cannot be built stops start-up with a message that says what to fix.
func (a *app) wireChat(ctx context.Context) error {
	ps, err := a.cfg.People()
	if err != nil {
		return err
	}
	d, err := bot.NewDirectory(ps)
	if err != nil {
		return fmt.Errorf("principals: %v; map each chat identity to exactly one principal in the config file", err)
	}
	a.bot.Chat().SetDirectory(d)
	a.people = d
	if len(ps) > 0 {
		a.log.Info("chat directory", "principals", len(ps))
	}
	return nil
}
