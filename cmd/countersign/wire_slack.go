package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	slackadapter "github.com/countersign/countersign/adapters/slack"
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
	var errs []error
	for i, p := range a.cfg.Principals {
		if p.Slack != "" && !slackadapter.ValidUserID(p.Slack) {
			errs = append(errs, fmt.Errorf("principals[%d].slack: %q is not a Slack user id; use the member id from the person's Slack profile (U… or W…, for example U0123ABC)", i, p.Slack))
		}
	}
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
		Approvers:   slackApprovers(a.cfg.Principals),
		RoleMembers: slackRoleMembers(a.cfg.Principals),
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
	}
	a.runners = append(a.runners, runner{name: "slack", run: ad.Run})
	return nil
}

// slackRoleMembers maps each role to the Slack user ids of the principals
// holding it: an escalation to a role mentions them.
func slackRoleMembers(ps []PrincipalDecl) map[string][]string {
	out := map[string][]string{}
	for _, p := range ps {
		if r, err := policy.ParseRole(p.Role); err == nil && slackadapter.ValidUserID(p.Slack) {
			out[string(r)] = append(out[string(r)], p.Slack)
		}
	}
	return out
}

// slackApprovers returns the Slack user ids of the mapped principals whose
// role holds the approve capability: they receive the detail of sensitive
// items privately.
func slackApprovers(ps []PrincipalDecl) []string {
	var out []string
	for _, p := range ps {
		r, err := policy.ParseRole(p.Role)
		if err == nil && slackadapter.ValidUserID(p.Slack) && policy.Grants(r, policy.CapApprove) {
			out = append(out, p.Slack)
		}
	}
	return out
}
