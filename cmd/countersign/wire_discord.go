package main

import (
	"context"

	"github.com/countersign/countersign/adapters/discord"
	"github.com/countersign/countersign/adapters/webhook"
)

// wireDiscord wires the Discord adapter when the config has a discord
// section: the outbox worker that posts and edits messages, then either the
// signed HTTP interactions endpoint (mode http) or the gateway connection
// (mode gateway), and the /countersign command registration. A missing or
// malformed secret stops start-up, naming the variable.
func (a *app) wireDiscord(ctx context.Context) error {
	d := a.cfg.Discord
	if d == nil {
		return nil
	}
	o, err := d.Options(a.getenv) // config/chat_options.go: the secrets, each problem named
	if err != nil {
		return err
	}
	o.Bot, o.Logger = a.bot, a.log.With("adapter", "discord")
	o.Transport = a.chatTransport("discord") // nil: the adapter's own (tracing.go)
	ad, err := discord.New(o)
	if err != nil {
		return err
	}
	a.runners = append(a.runners, runner{name: "discord outbox", run: ad.RunOutbox})
	switch d.Mode {
	case "http":
		a.mounts["POST /discord/interactions"] = ad.Handler()
		a.trust["POST /discord/interactions"] = webhook.TrustSigned // signed by Discord (Ed25519)
	case "gateway":
		a.runners = append(a.runners, runner{name: "discord gateway", run: ad.RunGateway})
	}
	if d.ApplicationID != "" {
		a.runners = append(a.runners, runner{name: "discord commands", run: ad.RegisterCommands})
	}
	return nil
}
