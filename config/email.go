package config

import (
	"net/mail"
	"strings"
	"time"

	emailadapter "github.com/countersign/countersign/adapters/email"
	"github.com/countersign/countersign/adapters/web"
)

// ---- email ----

// EmailConfig is the email section (docs/email.md); absent means email is
// off. A reminder or an escalation step reaches people by email when
// approvals.reminder_channel or approvals.escalation_channel is "email".
type EmailConfig struct {
	// From is the sender address.
	From string `yaml:"from"`
	// Include is what a message says of the item: summary (its title,
	// kind, requester and expiry) or none (only that an item awaits a
	// decision, and its number). Default none.
	Include string `yaml:"include"`
	// LinkTTL is how long a message's one-time console link lasts
	// (default 1h, at most 24h).
	LinkTTL time.Duration `yaml:"link_ttl"`
	SMTP    SMTPConfig    `yaml:"smtp"`
}

// SMTPConfig is the server email is sent through.
type SMTPConfig struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// StartTLS requires STARTTLS before anything is sent (default true);
	// false sends in the clear, for a relay on the same host only.
	StartTLS    *bool  `yaml:"starttls"`
	UsernameEnv string `yaml:"username_env"`
	PasswordEnv string `yaml:"password_env"`
}

func (e *EmailConfig) defaults() {
	if e.Include == "" {
		e.Include = emailadapter.IncludeNone
	}
	if e.LinkTTL == 0 {
		e.LinkTTL = time.Hour
	}
	if e.SMTP.Port == 0 {
		e.SMTP.Port = 587
	}
	if e.SMTP.StartTLS == nil {
		on := true
		e.SMTP.StartTLS = &on
	}
}

func (e EmailConfig) validate(c *Config, p *problems) {
	if strings.TrimSpace(e.From) == "" {
		p.add("email.from", "required: the sender address, such as countersign@hospital.example")
	} else if _, err := mail.ParseAddress(e.From); err != nil {
		p.add("email.from", "%q is not an email address", e.From)
	}
	switch e.Include {
	case emailadapter.IncludeSummary, emailadapter.IncludeNone:
	default:
		p.add("email.include", "%q: use summary (the item's title, kind, requester and expiry) or none (only that an item awaits a decision)", e.Include)
	}
	if e.LinkTTL < time.Minute || e.LinkTTL > web.MaxItemLinkTTL {
		p.add("email.link_ttl", "%s: a message's console link lasts between 1m and %s", e.LinkTTL, web.MaxItemLinkTTL)
	}
	if strings.TrimSpace(e.SMTP.Host) == "" {
		p.add("email.smtp.host", "required: the SMTP server (your mail relay)")
	}
	if e.SMTP.Port < 1 || e.SMTP.Port > 65535 {
		p.add("email.smtp.port", "%d is not a port (587 for submission with STARTTLS)", e.SMTP.Port)
	}
	if (e.SMTP.UsernameEnv == "") != (e.SMTP.PasswordEnv == "") {
		p.add("email.smtp", "username_env and password_env go together: set both to authenticate, or neither")
	}
	if !c.Web.Served() {
		p.add("email", "needs the web console (web.enabled: true): every message links to the item's page there")
	}
	for _, ch := range []struct{ key, names string }{{"slack.channels", "slack"}, {"discord.channels", "discord"}, {"teams.channels", "teams"}} {
		if chatChannels(c, ch.names)[emailadapter.Channel] != "" {
			p.add(ch.key+"."+emailadapter.Channel, "the channel name %q is email's while the email section is set; name this channel otherwise", emailadapter.Channel)
		}
	}
}

// chatChannels are a chat surface's configured channels.
func chatChannels(c *Config, surface string) map[string]string {
	switch {
	case surface == "slack" && c.Slack != nil:
		return c.Slack.Channels
	case surface == "discord" && c.Discord != nil:
		return c.Discord.Channels
	case surface == "teams" && c.Teams != nil:
		return c.Teams.Channels
	}
	return nil
}

// validateEmailAddress checks a principal's email address.
func validateEmailAddress(key, addr string, p *problems) {
	if strings.TrimSpace(addr) == "" {
		return
	}
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Name != "" || a.Address != strings.TrimSpace(addr) {
		p.add(key, "%q is not one email address (such as dr.smith@hospital.example)", addr)
	}
}

// validateLadder checks the steps of the escalation ladder that may be
// email: a reminder's channel is email or nothing, and an email step
// needs the email section.
func validateLadder(c *Config, p *problems) {
	a := c.Approvals
	switch a.ReminderChannel {
	case "":
	case emailadapter.Channel:
		if c.Email == nil {
			p.add("approvals.reminder_channel", "email needs the email section (docs/email.md)")
		}
	default:
		p.add("approvals.reminder_channel", "%q: a reminder goes in the item's threads on every chat surface; the one channel it may also go to is email", a.ReminderChannel)
	}
	if a.EscalationChannel == emailadapter.Channel && c.Email == nil {
		p.add("approvals.escalation_channel", "email needs the email section (docs/email.md)")
	}
}
