package main

import (
	"context"
	"fmt"

	scimadapter "github.com/countersign/countersign/adapters/scim"
	"github.com/countersign/countersign/bot"
)

// wireSCIM mounts the SCIM 2.0 service provider under /scim/v2/ when the
// config has a scim section. A missing token stops start-up, naming the
// variable.
func (a *app) wireSCIM(ctx context.Context) error {
	s := a.cfg.SCIM
	if s == nil {
		return nil
	}
	token := a.getenv(s.TokenEnv)
	if token == "" {
		return fmt.Errorf("scim.token_env: the environment variable %s is not set; set it to a long random token, and give the same token to the identity provider's provisioning app", s.TokenEnv)
	}
	if len(token) < 32 {
		return fmt.Errorf("scim.token_env: the token in %s is %d characters; use at least 32 random characters (openssl rand -hex 32)", s.TokenEnv, len(token))
	}
	ad, err := scimadapter.New(scimadapter.Options{
		Bot: a.bot, Token: bot.Secret(token), Role: s.Role, Match: a.people.Match,
		Logger: a.log.With("adapter", "scim"),
	})
	if err != nil {
		return err
	}
	a.mounts[scimadapter.Prefix+"/"] = ad.Handler()
	return nil
}
