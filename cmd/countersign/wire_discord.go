package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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
	var problems []error
	token := strings.TrimSpace(a.getenv(d.BotTokenEnv))
	if token == "" {
		problems = append(problems, fmt.Errorf("discord.bot_token_env: the environment variable %s is not set; set it to the bot token from the Discord developer portal (Bot tab)", d.BotTokenEnv))
	}
	var pub ed25519.PublicKey
	if d.Mode == "http" {
		raw := strings.TrimSpace(a.getenv(d.PublicKeyEnv))
		key, err := hex.DecodeString(raw)
		switch {
		case raw == "":
			problems = append(problems, fmt.Errorf("discord.public_key_env: the environment variable %s is not set; set it to the application's public key (hex) from the Discord developer portal (General Information)", d.PublicKeyEnv))
		case err != nil || len(key) != ed25519.PublicKeySize:
			problems = append(problems, fmt.Errorf("discord.public_key_env: the environment variable %s does not hold a hex Ed25519 public key of %d bytes", d.PublicKeyEnv, ed25519.PublicKeySize))
		default:
			pub = key
		}
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	ad, err := discord.New(discord.Options{
		Bot: a.bot, Token: token, PublicKey: pub,
		ApplicationID: d.ApplicationID, GuildID: d.GuildID, MemberEvents: d.MemberEvents,
		APIURL: d.APIURL, Channels: d.Channels, Logger: a.log.With("adapter", "discord"),
		Transport: a.chatTransport("discord"), // nil: the adapter's own (tracing.go)
	})
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
