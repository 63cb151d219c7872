package config

import (
	"crypto/ed25519"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

// directoryOf is the directory of people c's principals make, as serve
// builds it (Config.Directory).
func directoryOf(t *testing.T, c *Config) *bot.Directory {
	t.Helper()
	d, err := c.Directory()
	if err != nil {
		t.Fatalf("Directory: %v", err)
	}
	return d
}

// TestChatOptions: each chat section's options carry its keys and the
// secrets its *_env keys name; every missing or malformed secret is an
// error naming the key and the variable, all of them at once; Slack and
// Teams get their approvers (roles that approve: Slack's by qualified
// user, Teams's by Entra object id, lower-cased) and each role's members
// from the directory of people.
func TestChatOptions(t *testing.T) {
	t.Parallel()
	pub := hex.EncodeToString(make([]byte, ed25519.PublicKeySize))
	const appID = "11111111-2222-3333-4444-555555555555"
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	s := SlackConfig{Mode: "http", TeamID: "T1", BotTokenEnv: "SLACK_BOT", SigningSecretEnv: "SLACK_SIGN", AppTokenEnv: "SLACK_APP", APIURL: "http://127.0.0.1:1/api/", Channels: map[string]string{"default": "C0DEFAULT"}}
	sc := &Config{Slack: &s, Principals: []PrincipalDecl{
		{Name: "dr_smith", Role: "member", Slack: "U0SMITH"},
		{Name: "ward_viewer", Role: "viewer", Slack: "U0VIEW"},
		{Name: "ops", Role: "admin", Slack: "T2/U0OPS"},
		{Name: "nurse_lee", Role: "member", Teams: "00000000-0000-0000-0000-0000000000ab"},
	}}
	so, err := s.Options(env(map[string]string{"SLACK_BOT": "xoxb-1", "SLACK_SIGN": "sig"}), directoryOf(t, sc))
	if err != nil || so.BotToken != "xoxb-1" || so.SigningSecret != "sig" || so.AppToken != "" || so.Mode != "http" || so.Channels["default"] != "C0DEFAULT" {
		t.Errorf("slack, http: %+v %v; want bot token xoxb-1, signing secret sig, no app token, mode http, default channel C0DEFAULT", so, err)
	}
	if want := []string{"T1/U0SMITH", "T2/U0OPS"}; !slices.Equal(so.Approvers, want) {
		t.Errorf("slack approvers = %v, want %v (the members and admins mapped to Slack, by qualified user)", so.Approvers, want)
	}
	if got, want := so.RoleMembers, map[string][]string{"member": {"U0SMITH"}, "viewer": {"U0VIEW"}, "admin": {"U0OPS"}}; !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("slack role members = %v, want %v (user ids, as a mention takes them)", got, want)
	}
	s.Mode = "socket"
	if _, err := s.Options(env(nil), nil); err == nil || !strings.Contains(err.Error(), "slack.bot_token_env: the environment variable SLACK_BOT is not set") || !strings.Contains(err.Error(), "slack.app_token_env: the environment variable SLACK_APP is not set") || strings.Contains(err.Error(), "signing_secret") {
		t.Errorf("slack, socket, no secrets: %v; want the bot and app tokens named, not the signing secret", err)
	}

	d := DiscordConfig{Mode: "http", BotTokenEnv: "DISCORD_BOT", PublicKeyEnv: "DISCORD_PUB", ApplicationID: "123", GuildID: "456", Channels: map[string]string{"default": "789"}}
	do, err := d.Options(env(map[string]string{"DISCORD_BOT": " tok ", "DISCORD_PUB": pub}))
	if err != nil || do.Token != "tok" || len(do.PublicKey) != ed25519.PublicKeySize || do.ApplicationID != "123" || do.GuildID != "456" || do.Channels["default"] != "789" {
		t.Errorf("discord, http: %+v %v; want token tok, a %d-byte public key, application 123, guild 456, default channel 789", do, err, ed25519.PublicKeySize)
	}
	if _, err := d.Options(env(map[string]string{"DISCORD_PUB": "zz"})); err == nil || !strings.Contains(err.Error(), "discord.bot_token_env: the environment variable DISCORD_BOT is not set") || !strings.Contains(err.Error(), "DISCORD_PUB does not hold a hex Ed25519 public key") {
		t.Errorf("discord, no token and a bad key: %v; want both named", err)
	}
	d.Mode = "gateway"
	if do, err := d.Options(env(map[string]string{"DISCORD_BOT": "tok"})); err != nil || do.PublicKey != nil {
		t.Errorf("discord, gateway mode needs no public key: %+v %v; want no error and no public key", do, err)
	}

	c := &Config{Teams: &TeamsConfig{AppIDEnv: "TEAMS_ID", AppPasswordEnv: "TEAMS_PW", TenantID: " t1 ", Channels: map[string]string{"default": "19:d@thread.tacv2"}},
		Principals: []PrincipalDecl{
			{Name: "dr_smith", Role: "member", Teams: " 00000000-0000-0000-0000-0000000000AB "},
			{Name: "ward_viewer", Role: "viewer", Teams: "00000000-0000-0000-0000-000000000002"},
			{Name: "ops", Role: "admin", Slack: "T1/U1"},
		}}
	to, err := c.Teams.Options(env(map[string]string{"TEAMS_ID": appID, "TEAMS_PW": "pw"}), directoryOf(t, c))
	if err != nil || to.AppID != appID || to.AppPassword != "pw" || to.TenantID != "t1" || !slices.Equal(to.Approvers, []string{"00000000-0000-0000-0000-0000000000ab"}) ||
		len(to.RoleMembers["member"]) != 1 || to.RoleMembers["member"][0].Name != "dr_smith" || len(to.RoleMembers["viewer"]) != 1 || len(to.RoleMembers["admin"]) != 0 {
		t.Errorf("teams: %+v %v; want app %s, password pw, tenant t1, approvers [00000000-0000-0000-0000-0000000000ab], one member (dr_smith), one viewer, no admin", to, err, appID)
	}
	if _, err := c.Teams.Options(env(map[string]string{"TEAMS_ID": "not-a-guid"}), nil); err == nil || !strings.Contains(err.Error(), "TEAMS_ID does not hold a Microsoft app id") || !strings.Contains(err.Error(), "teams.app_password_env: the environment variable TEAMS_PW is not set") {
		t.Errorf("teams, a bad app id and no password: %v; want both named", err)
	}
}

// TestEmailOptions: the SMTP credentials come from the variables named
// (both missing: both named), STARTTLS is on unless turned off, and the
// people are the principals with an address, with their role and scopes.
func TestEmailOptions(t *testing.T) {
	t.Parallel()
	off := false
	c := &Config{Email: &EmailConfig{From: "countersign@ward7.example", Include: "summary", SMTP: SMTPConfig{Host: " smtp.ward7.example ", Port: 587, UsernameEnv: "SMTP_USER", PasswordEnv: "SMTP_PW"}},
		Principals: []PrincipalDecl{
			{Name: "ph_kim", Role: "member", Email: " kim@ward7.example ", Scopes: []string{"patient_42"}},
			{Name: "ops", Role: "admin", Slack: "T1/U1"},
		}}
	o, err := c.Email.Options(func(k string) string { return map[string]string{"SMTP_USER": "u", "SMTP_PW": "p"}[k] }, directoryOf(t, c))
	if err != nil || o.SMTP.Host != "smtp.ward7.example" || !o.SMTP.StartTLS || o.SMTP.Username != "u" || o.SMTP.Password != "p" || o.From != c.Email.From ||
		len(o.People) != 1 || o.People[0].Address != "kim@ward7.example" || o.People[0].Name != "ph_kim" || !slices.Equal(o.People[0].Scopes, []string{"patient_42"}) ||
		o.People[0].ID != "chat:ph_kim" || o.People[0].Kind != "person" || o.People[0].Role != "member" {
		t.Errorf("email: %+v %v; want host smtp.ward7.example with STARTTLS, user u, password p, from %s and one person (chat:ph_kim, kim@ward7.example, a member, scopes [patient_42])", o, err, c.Email.From)
	}
	c.Email.SMTP.StartTLS = &off
	if o, err := c.Email.Options(func(string) string { return "" }, nil); err == nil || o.SMTP.StartTLS ||
		!strings.Contains(err.Error(), "email.smtp.username_env: the environment variable SMTP_USER is not set") || !strings.Contains(err.Error(), "email.smtp.password_env: the environment variable SMTP_PW is not set") {
		t.Errorf("email without credentials, STARTTLS off: %+v %v; want STARTTLS off and both SMTP_USER and SMTP_PW named unset", o.SMTP, err)
	}
}
