package main

import (
	"context"

	scimadapter "github.com/countersign/countersign/adapters/scim"
)

// wireSCIM mounts the SCIM 2.0 service provider under /scim/v2/ when the
// config has a scim section. A missing token stops start-up, naming the
// variable.
func (a *app) wireSCIM(ctx context.Context) error {
	s := a.cfg.SCIM
	if s == nil {
		return nil
	}
	token, err := s.Token(a.getenv) // config/wire_options.go
	if err != nil {
		return err
	}
	ad, err := scimadapter.New(scimadapter.Options{
		Bot: a.bot, Token: token, Role: s.Role, Match: a.people.Match,
		Logger: a.log.With("adapter", "scim"),
	})
	if err != nil {
		return err
	}
	a.mounts[scimadapter.Prefix+"/"] = ad.Handler()
	return nil
}
