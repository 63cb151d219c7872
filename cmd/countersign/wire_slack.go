package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	slackadapter "github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// wireSlack wires the Slack adapter: in http mode the signed endpoints
// POST /slack/interactions and POST /slack/commands, in socket mode the
// outbound WebSocket; in both, the outbox worker that posts and updates
// messages. A secret missing from the environment stops start-up.
func (a *app) wireSlack(ctx context.Context) error {
	s := a.cfg.Slack
	if s == nil {
		return nil
	}
	var errs []error // slack.team_id and principals[].slack are checked by config.Load
	secret := func(key, name, what string) string {
		v := a.getenv(name)
		if v == "" {
			errs = append(errs, fmt.Errorf("slack.%s: the environment variable %s is not set; set it to %s", key, name, what))
		}
		return v
	}
	o := slackadapter.Options{
		Bot:         a.bot,
		Mode:        s.Mode,
		BotToken:    secret("bot_token_env", s.BotTokenEnv, "the Slack bot token (xoxb-…)"),
		APIURL:      s.APIURL,
		Channels:    s.Channels,
		Approvers:   slackApprovers(a.people),
		RoleMembers: slackRoleMembers(a.people),
		Logger:      a.log,
		HTTPClient:  a.chatClient("slack", 10*time.Second), // nil: the adapter's own (tracing.go)
	}
	switch s.Mode {
	case slackadapter.ModeHTTP:
		o.SigningSecret = secret("signing_secret_env", s.SigningSecretEnv, "the Slack app's signing secret")
	case slackadapter.ModeSocket:
		o.AppToken = secret("app_token_env", s.AppTokenEnv, "the Slack app-level token (xapp-…, scope connections:write)")
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	ad, err := slackadapter.New(o)
	if err != nil {
		return err
	}
	if s.Mode == slackadapter.ModeHTTP {
		a.mounts["POST /slack/interactions"] = ad.InteractionsHandler()
		a.mounts["POST /slack/commands"] = ad.CommandsHandler()
		a.mounts["POST /slack/events"] = ad.EventsHandler()
		// Slack calls these with the Host of the Request URL it was
		// given, and signs them: no Host or Origin check.
		a.trust["POST /slack/interactions"] = webhook.TrustSigned
		a.trust["POST /slack/commands"] = webhook.TrustSigned
		a.trust["POST /slack/events"] = webhook.TrustSigned
	}
	a.runners = append(a.runners,
		runner{name: "slack clicks", run: ad.RunClicks, everyReplica: true},
		runner{name: "slack", run: ad.RunOutbox})
	return nil
}

// slackRoleMembers maps each role to the Slack user ids of the people
// holding it: an escalation to a role mentions them.
func slackRoleMembers(d *bot.Directory) map[string][]string {
	out := map[string][]string{}
	for _, p := range d.People() {
		if p.Slack != "" {
			out[string(p.Role)] = append(out[string(p.Role)], slackadapter.UserOf(p.Slack))
		}
	}
	return out
}

// slackApprovers returns the Slack user ids of the mapped people whose
// role holds the approve capability: they receive the detail of sensitive
// items privately.
func slackApprovers(d *bot.Directory) []string {
	var out []string
	for _, p := range d.People() {
		if p.Slack != "" && policy.Grants(p.Role, policy.CapApprove) {
			out = append(out, p.Slack) // qualified (T…/U…): the directory's key
		}
	}
	return out
}
