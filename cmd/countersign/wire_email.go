package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	emailadapter "github.com/countersign/countersign/adapters/email"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/policy"
)

// wireEmail wires email when the config has an email section: the runner
// that drains the outbox's reminders and escalations addressed to
// "email" to the SMTP server. Missing SMTP credentials stop start-up,
// naming the variable.
func (a *app) wireEmail(ctx context.Context) error {
	e := a.cfg.Email
	if e == nil {
		return nil
	}
	s := emailadapter.SMTP{Host: strings.TrimSpace(e.SMTP.Host), Port: e.SMTP.Port, StartTLS: e.SMTP.StartTLS == nil || *e.SMTP.StartTLS}
	var errs []error
	if e.SMTP.UsernameEnv != "" {
		if s.Username = a.getenv(e.SMTP.UsernameEnv); s.Username == "" {
			errs = append(errs, fmt.Errorf("email.smtp.username_env: the environment variable %s is not set; set it to the SMTP user name", e.SMTP.UsernameEnv))
		}
		if s.Password = a.getenv(e.SMTP.PasswordEnv); s.Password == "" {
			errs = append(errs, fmt.Errorf("email.smtp.password_env: the environment variable %s is not set; set it to the SMTP password", e.SMTP.PasswordEnv))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ad, err := emailadapter.New(emailadapter.Options{
		Bot: a.bot, From: e.From, Include: e.Include, SMTP: s, People: emailPeople(a.cfg), LinkTTL: e.LinkTTL,
		Logger: a.log.With("adapter", "email"),
	})
	if err != nil {
		return err
	}
	a.runners = append(a.runners, runner{name: "email", run: ad.Run})
	return nil
}

// emailPeople are the configured principals with an email address, as
// the people an email may reach.
func emailPeople(cfg *config.Config) []emailadapter.Person {
	var out []emailadapter.Person
	for _, p := range cfg.Principals {
		addr := strings.TrimSpace(p.Email)
		r, err := policy.ParseRole(p.Role)
		if addr == "" || err != nil {
			continue
		}
		scopes, err := config.ParseScopes(p.Scopes)
		if err != nil {
			continue // validate reported it
		}
		out = append(out, emailadapter.Person{Principal: bot.Principal{ID: "chat:" + p.Name, Name: p.Name, Role: r, Kind: "person", Scopes: scopes}, Address: addr})
	}
	return out
}
