package main

import (
	"context"

	"github.com/countersign/countersign/adapters/oauth"
	"github.com/countersign/countersign/adapters/webhook"
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
		People: a.people, // wireChat
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

var _ webhook.Authenticator = oauth.Authenticator{}
