package main

import "context"

// wireChat builds the directory of people (who a chat user, a console
// sign-in or a directory user is: bot.Directory) from principals: in the
// configuration. The chat commands themselves are run by the Slack and
// Discord adapters through package chat (bot/chat). A directory that
// cannot be built stops start-up with a message that says what to fix.
func (a *app) wireChat(ctx context.Context) error {
	d, err := a.cfg.Directory() // config/people.go
	if err != nil {
		return err
	}
	a.bot.Chat().SetDirectory(d)
	a.people = d
	if n := len(d.People()); n > 0 {
		a.log.Info("chat directory", "principals", n)
	}
	return nil
}
