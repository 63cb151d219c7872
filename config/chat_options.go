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
// error naming the key and the variable, every problem at once. Who the
// people are on a surface (its approvers, the members of each role, the
// addresses an email may reach) is read from the directory of people
// (Directory), the one answer every surface shares. What only the running
// process holds (the bot, the logger, the HTTP client) is the caller's to
// add.

// Options are the Slack adapter's options from the slack section and the
// people mapped to Slack: the approvers (whose role holds approve), who
// receive the detail of sensitive items privately, and the members of each
// role, whom an escalation to the role mentions.
func (s SlackConfig) Options(getenv func(string) string, people *bot.Directory) (slackadapter.Options, error) {
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
		Channels: s.Channels, RoleMembers: map[string][]string{},
	}
	for _, p := range people.People() {
		if p.Slack == "" {
			continue
		}
		if policy.Grants(p.Role, policy.CapApprove) {
			o.Approvers = append(o.Approvers, p.Slack) // qualified (T…/U…): the directory's key
		}
		o.RoleMembers[string(p.Role)] = append(o.RoleMembers[string(p.Role)], slackadapter.UserOf(p.Slack))
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

// Options are the Teams adapter's options from the teams section and the
// people mapped to Teams: the approvers (whose role holds approve, by
// Entra object id) and the members of each role, for an escalation's
// mentions.
func (t TeamsConfig) Options(getenv func(string) string, people *bot.Directory) (teamsadapter.Options, error) {
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
	for _, p := range people.People() {
		if p.Teams == "" { // lower case in the directory, as Teams compares it
			continue
		}
		if policy.Grants(p.Role, policy.CapApprove) {
			o.Approvers = append(o.Approvers, p.Teams)
		}
		o.RoleMembers[string(p.Role)] = append(o.RoleMembers[string(p.Role)], teamsadapter.Member{ID: p.Teams, Name: p.Name})
	}
	return o, errors.Join(errs...)
}

// Options are the email adapter's options from the email section and the
// people with an address (the people an email may reach, as the principal
// each acts as); the SMTP credentials are read from the variables the
// section names.
func (e EmailConfig) Options(getenv func(string) string, people *bot.Directory) (emailadapter.Options, error) {
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
	for _, p := range people.People() {
		if p.Email != "" {
			o.People = append(o.People, emailadapter.Person{Principal: p.Principal(), Address: p.Email})
		}
	}
	return o, errors.Join(errs...)
}
