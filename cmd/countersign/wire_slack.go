package main

import (
	"context"
	"time"

	slackadapter "github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/adapters/webhook"
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
	o, err := s.Options(a.getenv, a.people) // config/chat_options.go: the secrets, each problem named; the approvers, the roles' members
	if err != nil {
		return err
	}
	o.Bot, o.Logger = a.bot, a.log
	o.HTTPClient = a.tracing.Client("slack", 10*time.Second) // a span per call; nil when off: the adapter's own (tracing.go)
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
