package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	teamsadapter "github.com/countersign/countersign/adapters/teams"
	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/policy"
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
	var errs []error
	appID := strings.TrimSpace(a.getenv(t.AppIDEnv))
	switch {
	case appID == "":
		errs = append(errs, fmt.Errorf("teams.app_id_env: the environment variable %s is not set; set it to the bot's Microsoft app id (Azure Bot resource, Configuration)", t.AppIDEnv))
	case !teamsadapter.ValidObjectID(appID):
		errs = append(errs, fmt.Errorf("teams.app_id_env: the environment variable %s does not hold a Microsoft app id (a GUID)", t.AppIDEnv))
	}
	password := a.getenv(t.AppPasswordEnv)
	if password == "" {
		errs = append(errs, fmt.Errorf("teams.app_password_env: the environment variable %s is not set; set it to the client secret of the bot's app registration", t.AppPasswordEnv))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ad, err := teamsadapter.New(teamsadapter.Options{
		Bot: a.bot, AppID: appID, AppPassword: password, TenantID: strings.TrimSpace(t.TenantID),
		APIURL: t.APIURL, TokenURL: t.TokenURL, OpenIDMetadataURL: t.OpenIDMetadataURL, Issuer: t.Issuer,
		Channels: t.Channels, Approvers: teamsApprovers(a.cfg), RoleMembers: teamsRoleMembers(a.cfg),
		HTTPClient: a.chatClient("teams", 10*time.Second), // nil: the adapter's own (tracing.go)
		Logger:     a.log.With("adapter", "teams"),
	})
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

// teamsApprovers are the Entra object ids of the mapped principals whose
// role holds the approve capability: the cards name those the one rule
// lets decide an item, so that they see its buttons.
func teamsApprovers(cfg *config.Config) []string {
	var out []string
	for _, p := range cfg.Principals {
		r, err := policy.ParseRole(p.Role)
		if id := strings.TrimSpace(p.Teams); err == nil && id != "" && policy.Grants(r, policy.CapApprove) {
			out = append(out, strings.ToLower(id))
		}
	}
	return out
}

// teamsRoleMembers maps each role to the people holding it, for the
// mentions of an escalation to that role.
func teamsRoleMembers(cfg *config.Config) map[string][]teamsadapter.Member {
	out := map[string][]teamsadapter.Member{}
	for _, p := range cfg.Principals {
		if r, err := policy.ParseRole(p.Role); err == nil && strings.TrimSpace(p.Teams) != "" {
			out[string(r)] = append(out[string(r)], teamsadapter.Member{ID: strings.ToLower(strings.TrimSpace(p.Teams)), Name: p.Name})
		}
	}
	return out
}
