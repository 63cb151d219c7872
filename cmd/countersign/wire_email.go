package main

import (
	"context"

	emailadapter "github.com/countersign/countersign/adapters/email"
)

// wireEmail wires email when the config has an email section: the runner
// that drains the outbox's reminders and escalations addressed to
// "email" to the SMTP server. Missing SMTP credentials stop start-up,
// naming the variable.
func (a *app) wireEmail(ctx context.Context) error {
	e := a.cfg.Email
	if e == nil {
		return nil
	}
	o, err := e.Options(a.getenv, a.people) // config/chat_options.go: SMTP credentials, the people with an address
	if err != nil {
		return err
	}
	o.Bot, o.Logger = a.bot, a.log.With("adapter", "email")
	ad, err := emailadapter.New(o)
	if err != nil {
		return err
	}
	a.runners = append(a.runners, runner{name: "email", run: ad.Run})
	return nil
}
