package main

import (
	"context"
	"time"

	teamsadapter "github.com/countersign/countersign/adapters/teams"
	"github.com/countersign/countersign/adapters/webhook"
)

// wireTeams wires the Microsoft Teams adapter when the config has a teams
// section: the messaging endpoint POST /teams/messages (every request's
// token checked by the adapter) and the runner that drains the outbox to
// the Bot Connector. A missing credential stops start-up, naming the
// variable.
func (a *app) wireTeams(ctx context.Context) error {
	t := a.cfg.Teams
	if t == nil {
		return nil
	}
	o, err := t.Options(a.getenv, a.people) // config/chat_options.go: the secrets, the approvers, the roles' members
	if err != nil {
		return err
	}
	o.Bot, o.Logger = a.bot, a.log.With("adapter", "teams")
	o.HTTPClient = a.tracing.Client("teams", 10*time.Second) // a span per call; nil when off: the adapter's own (tracing.go)
	ad, err := teamsadapter.New(o)
	if err != nil {
		return err
	}
	a.mounts["POST /teams/messages"] = ad.Handler()
	// The Bot Framework calls it with the Host of the messaging endpoint
	// it was given, and signs every request: no Host or Origin check.
	a.trust["POST /teams/messages"] = webhook.TrustSigned
	a.runners = append(a.runners,
		runner{name: "teams activities", run: ad.RunActivities, everyReplica: true},
		runner{name: "teams", run: ad.RunOutbox})
	return nil
}
