package main

import (
	"context"
	"fmt"
	"strings"

	slackadapter "github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/policy"
)

// wireChat builds the chat directory (chat identity -> principal) from
// principals: in the configuration. The chat commands themselves are run by
// the Slack and Discord adapters through package chat (bot/chat). A directory that
// cannot be built stops start-up with a message that says what to fix.
func (a *app) wireChat(ctx context.Context) error {
	ps := make([]bot.ChatPrincipal, 0, len(a.cfg.Principals))
	for i, p := range a.cfg.Principals {
		key := fmt.Sprintf("principals[%d]", i)
		if err := bot.ValidateName(p.Name); err != nil {
			return fmt.Errorf("%s.name: %q %v; fix it in the config file", key, p.Name, err)
		}
		role, err := policy.ParseRole(p.Role)
		if err != nil {
			return fmt.Errorf("%s.role: %v", key, err)
		}
		scopes, err := config.ParseScopes(p.Scopes)
		if err != nil {
			return fmt.Errorf("%s.scopes: %v", key, err)
		}
		roles := make([]string, 0, len(p.DiscordRoles))
		for _, r := range p.DiscordRoles {
			if r = strings.TrimSpace(r); r != "" {
				roles = append(roles, r)
			}
		}
		ps = append(ps, bot.ChatPrincipal{
			Name:         p.Name,
			Role:         role,
			Slack:        slackID(a.cfg, p),
			Discord:      strings.TrimSpace(p.Discord),
			DiscordRoles: roles,
			Teams:        strings.ToLower(strings.TrimSpace(p.Teams)),
			Scopes:       scopes,
		})
	}
	d, err := bot.NewDirectory(ps)
	if err != nil {
		return fmt.Errorf("principals: %v; map each chat identity to exactly one principal in the config file", err)
	}
	a.bot.Chat().SetDirectory(d)
	if len(ps) > 0 {
		a.log.Info("chat directory", "principals", len(ps))
	}
	return nil
}

// slackID is the directory's id of a principal's Slack user, WORKSPACE/USER
// (slackadapter.QualifiedUser), or "" when Slack is off or the mapping is
// invalid (wireSlack reports that and stops start-up).
func slackID(c *config.Config, p config.PrincipalDecl) string {
	if c.Slack == nil || strings.TrimSpace(p.Slack) == "" {
		return ""
	}
	id, err := slackadapter.QualifiedUser(p.Slack, strings.TrimSpace(c.Slack.TeamID))
	if err != nil {
		return ""
	}
	return id
}
