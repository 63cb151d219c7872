package config

import (
	"fmt"
	"strings"

	slackadapter "github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// Directory is the directory of people (bot.Directory: who a chat user, a
// console sign-in or a directory user is) built from principals:, or an
// error that says what to fix.
func (c *Config) Directory() (*bot.Directory, error) {
	ps, err := c.People()
	if err != nil {
		return nil, err
	}
	d, err := bot.NewDirectory(ps)
	if err != nil {
		return nil, fmt.Errorf("principals: %v; map each chat identity to exactly one principal in the config file", err)
	}
	return d, nil
}

// People are the principals: section as the bot's directory of people
// takes them (bot.NewDirectory), each chat identity in the form its
// surface reports it. A principal that cannot be one is an error naming
// its key.
func (c *Config) People() ([]bot.ChatPrincipal, error) {
	ps := make([]bot.ChatPrincipal, 0, len(c.Principals))
	for i, p := range c.Principals {
		key := fmt.Sprintf("principals[%d]", i)
		if err := bot.ValidateName(p.Name); err != nil {
			return nil, fmt.Errorf("%s.name: %q %v; fix it in the config file", key, p.Name, err)
		}
		role, err := policy.ParseRole(p.Role)
		if err != nil {
			return nil, fmt.Errorf("%s.role: %v", key, err)
		}
		scopes, err := ParseScopes(p.Scopes)
		if err != nil {
			return nil, fmt.Errorf("%s.scopes: %v", key, err)
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
			Slack:        c.SlackID(p),
			Discord:      strings.TrimSpace(p.Discord),
			DiscordRoles: roles,
			Teams:        strings.ToLower(strings.TrimSpace(p.Teams)),
			Scopes:       scopes,
			Web:          strings.TrimSpace(p.Web),
			Email:        strings.TrimSpace(p.Email),
		})
	}
	return ps, nil
}

// SlackID is the directory's id of a principal's Slack user, WORKSPACE/USER
// (slackadapter.QualifiedUser), or "" when Slack is off or the mapping is
// invalid (the Slack wiring reports that and stops start-up).
func (c *Config) SlackID(p PrincipalDecl) string {
	if c.Slack == nil || strings.TrimSpace(p.Slack) == "" {
		return ""
	}
	id, err := slackadapter.QualifiedUser(p.Slack, strings.TrimSpace(c.Slack.TeamID))
	if err != nil {
		return ""
	}
	return id
}
