package main

import (
	"context"
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
	o, err := s.Options(a.getenv) // config/chat_options.go: the secrets, each problem named
	if err != nil {
		return err
	}
	o.Bot, o.Logger = a.bot, a.log
	o.Approvers, o.RoleMembers = slackApprovers(a.people), slackRoleMembers(a.people)
	o.HTTPClient = a.chatClient("slack", 10*time.Second) // nil: the adapter's own (tracing.go)
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
