package web

import (
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/bot"
)

// InstallLinks gives the bot the console's one-time links (bot.WebLinks),
// each for the caller only and starting with base: a sign-in link (the
// `/countersign web` chat command), a sign-in link that lands on an item's
// page and lasts itemTTL (an email carries it), and, with single sign-on,
// a step-up link (a chat click on an item that requires a fresh sign-in).
// Only a configured person who may sign in gets one; a step-up link also
// needs the person's single sign-on identity (principals[].web). Call it
// while wiring, before the bot serves.
func (h *Handler) InstallLinks(base string, itemTTL time.Duration) {
	links := h.o.Bot.WebLinks()
	links.Set(h.o.PublicURL, func(c *bot.Caller) (string, error) {
		if err := h.mayLink(c, false); err != nil {
			return "", err
		}
		tok, err := MintLink(h.o.LinkKey, "c:"+c.Name, h.o.Bot.Now())
		if err != nil {
			return "", err
		}
		return SignInURL(base, tok), nil
	})
	links.SetItemLink(func(c *bot.Caller, id uint64) (string, error) {
		if err := h.mayLink(c, false); err != nil {
			return "", err
		}
		tok, err := MintItemLink(h.o.LinkKey, "c:"+c.Name, id, h.o.Bot.Now(), itemTTL)
		if err != nil {
			return "", err
		}
		return SignInURL(base, tok), nil
	})
	if h.o.OIDC == nil {
		return
	}
	links.SetStepUp(func(c *bot.Caller, id uint64) (string, error) {
		if err := h.mayLink(c, true); err != nil {
			return "", err
		}
		tok, err := MintStepUpLink(h.o.LinkKey, "c:"+c.Name, id, h.o.Bot.Now())
		if err != nil {
			return "", err
		}
		return StepUpURL(base, tok), nil
	})
}

// mayLink says why c gets no one-time link: only a configured person who
// may sign in does (with a single sign-on identity, for step-up: sso).
func (h *Handler) mayLink(c *bot.Caller, sso bool) error {
	if c == nil {
		return errors.New("only people sign in to the web console")
	}
	if r := bot.CheckSignIn(c.Principal); r != nil {
		return r
	}
	p, ok := h.o.People[c.Name]
	switch {
	case sso && (!ok || p.Web == ""):
		return fmt.Errorf("%s has no single sign-on identity (principals[].web in the config)", c.Name)
	case !ok:
		return fmt.Errorf("%s is not under principals: in the config", c.Name)
	}
	return nil
}
