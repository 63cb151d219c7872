package main

import (
	"context"
	"strings"

	"github.com/countersign/countersign/adapters/oauth"
	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/policy"
)

// wireOAuth makes the HTTP API and MCP over HTTP an OAuth 2.1 resource
// server beside the API keys when mcp.oauth is set: the Protected Resource
// Metadata is mounted, and bearer credentials are authenticated as keys or
// access tokens (a.auth). Without it a.auth is the bot: keys only.
func (a *app) wireOAuth(context.Context) error {
	a.auth = a.bot
	o := a.cfg.MCP.OAuth
	if o == nil {
		return nil
	}
	v, err := oauth.New(oauth.Options{
		Issuer: o.Issuer, Audience: o.Audience, Claim: o.Claim,
		People: oauthPeople(a.cfg.Principals),
		Stored: a.bot,
		Now:    a.bot.Now,
		Logger: a.log,
	})
	if err != nil {
		return err
	}
	for _, path := range v.MetadataPaths() {
		a.mounts["GET "+path] = v.MetadataHandler()
		a.mounts["OPTIONS "+path] = v.MetadataHandler()
	}
	a.auth = oauth.Authenticator{Keys: a.bot, Verifier: v}
	a.log.Info("mcp.oauth: accepting access tokens beside API keys", "issuer", o.Issuer, "audience", o.Audience, "claim", o.Claim)
	return nil
}

// oauthPeople are the configured principals an access token's subject may
// name, by their web identity (principals[].web).
func oauthPeople(ps []config.PrincipalDecl) map[string]bot.Principal {
	out := map[string]bot.Principal{}
	for _, p := range ps {
		if strings.TrimSpace(p.Web) == "" {
			continue
		}
		r, err := policy.ParseRole(p.Role)
		if err != nil {
			continue // validate reported it
		}
		scopes, err := config.ParseScopes(p.Scopes)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(p.Web)] = bot.Principal{Name: p.Name, Role: r, Scopes: scopes}
	}
	return out
}

var _ webhook.Authenticator = oauth.Authenticator{}
