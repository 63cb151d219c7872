package config

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/adapters/discord"
	emailadapter "github.com/countersign/countersign/adapters/email"
	slackadapter "github.com/countersign/countersign/adapters/slack"
	teamsadapter "github.com/countersign/countersign/adapters/teams"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// This file turns the chat sections into their adapters' options, next to
// the keys they read: the secrets are read from the environment variables
// the section names (getenv), and one that is missing or malformed is an
// error naming the key and the variable, every problem at once. What only
// the running process holds (the bot, the logger, the HTTP client, the
// directory of people) is the caller's to add.

// Options are the Slack adapter's options from the slack section.
func (s SlackConfig) Options(getenv func(string) string) (slackadapter.Options, error) {
	var errs []error
	secret := func(key, name, what string) string {
		v := getenv(name)
		if v == "" {
			errs = append(errs, fmt.Errorf("slack.%s: the environment variable %s is not set; set it to %s", key, name, what))
		}
		return v
	}
	o := slackadapter.Options{
		Mode:     s.Mode,
		BotToken: secret("bot_token_env", s.BotTokenEnv, "the Slack bot token (xoxb-…)"),
		APIURL:   s.APIURL,
		Channels: s.Channels,
	}
	switch s.Mode {
	case slackadapter.ModeHTTP:
		o.SigningSecret = secret("signing_secret_env", s.SigningSecretEnv, "the Slack app's signing secret")
	case slackadapter.ModeSocket:
		o.AppToken = secret("app_token_env", s.AppTokenEnv, "the Slack app-level token (xapp-…, scope connections:write)")
	}
	return o, errors.Join(errs...)
}

// Options are the Discord adapter's options from the discord section.
func (d DiscordConfig) Options(getenv func(string) string) (discord.Options, error) {
	var errs []error
	token := strings.TrimSpace(getenv(d.BotTokenEnv))
	if token == "" {
		errs = append(errs, fmt.Errorf("discord.bot_token_env: the environment variable %s is not set; set it to the bot token from the Discord developer portal (Bot tab)", d.BotTokenEnv))
	}
	var pub ed25519.PublicKey
	if d.Mode == "http" {
		raw := strings.TrimSpace(getenv(d.PublicKeyEnv))
		key, err := hex.DecodeString(raw)
		switch {
		case raw == "":
			errs = append(errs, fmt.Errorf("discord.public_key_env: the environment variable %s is not set; set it to the application's public key (hex) from the Discord developer portal (General Information)", d.PublicKeyEnv))
		case err != nil || len(key) != ed25519.PublicKeySize:
			errs = append(errs, fmt.Errorf("discord.public_key_env: the environment variable %s does not hold a hex Ed25519 public key of %d bytes", d.PublicKeyEnv, ed25519.PublicKeySize))
		default:
			pub = key
		}
	}
	return discord.Options{
		Token: token, PublicKey: pub, ApplicationID: d.ApplicationID, GuildID: d.GuildID,
		MemberEvents: d.MemberEvents, APIURL: d.APIURL, Channels: d.Channels,
	}, errors.Join(errs...)
}

// TeamsOptions are the Teams adapter's options from the teams section and
// the principals mapped to Teams: the approvers (whose role holds
// approve, by Entra object id) and the members of each role, for an
// escalation's mentions.
func (c *Config) TeamsOptions(getenv func(string) string) (teamsadapter.Options, error) {
	t := c.Teams
	if t == nil {
		return teamsadapter.Options{}, errors.New("teams: the section is absent")
	}
	var errs []error
	appID := strings.TrimSpace(getenv(t.AppIDEnv))
	switch {
	case appID == "":
		errs = append(errs, fmt.Errorf("teams.app_id_env: the environment variable %s is not set; set it to the bot's Microsoft app id (Azure Bot resource, Configuration)", t.AppIDEnv))
	case !teamsadapter.ValidObjectID(appID):
		errs = append(errs, fmt.Errorf("teams.app_id_env: the environment variable %s does not hold a Microsoft app id (a GUID)", t.AppIDEnv))
	}
	password := getenv(t.AppPasswordEnv)
	if password == "" {
		errs = append(errs, fmt.Errorf("teams.app_password_env: the environment variable %s is not set; set it to the client secret of the bot's app registration", t.AppPasswordEnv))
	}
	o := teamsadapter.Options{
		AppID: appID, AppPassword: password, TenantID: strings.TrimSpace(t.TenantID),
		APIURL: t.APIURL, TokenURL: t.TokenURL, OpenIDMetadataURL: t.OpenIDMetadataURL, Issuer: t.Issuer,
		Channels: t.Channels, RoleMembers: map[string][]teamsadapter.Member{},
	}
	for _, p := range c.Principals {
		r, err := policy.ParseRole(p.Role)
		id := strings.ToLower(strings.TrimSpace(p.Teams))
		if err != nil || id == "" {
			continue
		}
		if policy.Grants(r, policy.CapApprove) {
			o.Approvers = append(o.Approvers, id)
		}
		o.RoleMembers[string(r)] = append(o.RoleMembers[string(r)], teamsadapter.Member{ID: id, Name: p.Name})
	}
	return o, errors.Join(errs...)
}

// EmailOptions are the email adapter's options from the email section and
// the principals with an address (the people an email may reach); the
// SMTP credentials are read from the variables the section names.
func (c *Config) EmailOptions(getenv func(string) string) (emailadapter.Options, error) {
	e := c.Email
	if e == nil {
		return emailadapter.Options{}, errors.New("email: the section is absent")
	}
	s := emailadapter.SMTP{Host: strings.TrimSpace(e.SMTP.Host), Port: e.SMTP.Port, StartTLS: e.SMTP.StartTLS == nil || *e.SMTP.StartTLS}
	var errs []error
	if e.SMTP.UsernameEnv != "" {
		if s.Username = getenv(e.SMTP.UsernameEnv); s.Username == "" {
			errs = append(errs, fmt.Errorf("email.smtp.username_env: the environment variable %s is not set; set it to the SMTP user name", e.SMTP.UsernameEnv))
		}
		if s.Password = getenv(e.SMTP.PasswordEnv); s.Password == "" {
			errs = append(errs, fmt.Errorf("email.smtp.password_env: the environment variable %s is not set; set it to the SMTP password", e.SMTP.PasswordEnv))
		}
	}
	o := emailadapter.Options{From: e.From, Include: e.Include, SMTP: s, LinkTTL: e.LinkTTL}
	for _, p := range c.Principals {
		addr := strings.TrimSpace(p.Email)
		r, err := policy.ParseRole(p.Role)
		if addr == "" || err != nil {
			continue
		}
		scopes, err := ParseScopes(p.Scopes)
		if err != nil {
			continue // validate reported it
		}
		o.People = append(o.People, emailadapter.Person{Principal: bot.Principal{ID: "chat:" + p.Name, Name: p.Name, Role: r, Kind: "person", Scopes: scopes}, Address: addr})
	}
	return o, errors.Join(errs...)
}
