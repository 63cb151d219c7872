package bot

import (
	"errors"
	"fmt"
	"strings"
)

// webConsole is what the core knows of the web console: where it is (for
// links on chat cards) and how to mint a one-time sign-in link.
type webConsole struct {
	base string                        // public URL, no trailing slash; "" when not public
	link func(*Caller) (string, error) // nil when the console is off
	// stepUp mints a one-time link to approve an item after a fresh
	// sign-in (nil: step-up links are not available).
	stepUp func(*Caller, uint64) (string, error)
	// item mints a one-time sign-in link that lands on an item's page,
	// for a message read later than a chat answer (an email); nil: none.
	item func(*Caller, uint64) (string, error)
}

// ErrNoWebConsole is returned by WebLinks.SignIn and WebLinks.StepUp when
// the console is off.
var ErrNoWebConsole = errors.New("the web console is off here (web.enabled: false)")

// WebLinks is the bot's side of the web console: where it is and how to
// mint its one-time links. Reach it with Bot.WebLinks. It is an accessor,
// as Items is: the links chat, email and the console mint, grouped apart
// from the paths every call takes.
type WebLinks struct{ b *Bot }

// WebLinks returns the bot's web console links.
func (b *Bot) WebLinks() WebLinks { return WebLinks{b: b} }

// Set tells the core about the web console: base is its public URL
// (web.public_url; "" when unset: chat cards then carry no link), and link
// mints a one-time sign-in URL for a caller (nil: the console is off).
// Call it while wiring, before the bot serves.
func (w WebLinks) Set(base string, link func(*Caller) (string, error)) {
	base = strings.TrimRight(base, "/")
	if strings.ContainsAny(base, "<>|\" \t\n") {
		base = "" // never put a link that could break out of a chat's link syntax
	}
	w.b.web.base, w.b.web.link = base, link
}

// SetStepUp tells the core how to mint a one-time step-up link: a URL
// that leads the caller to item id in the console through a fresh sign-in
// at the identity provider, for that caller only.
func (w WebLinks) SetStepUp(link func(c *Caller, id uint64) (string, error)) { w.b.web.stepUp = link }

// StepUp mints a one-time step-up link to item id for caller (a
// chat click on an item that requires step-up answers with it).
func (w WebLinks) StepUp(c *Caller, id uint64) (string, error) {
	if w.b.web.stepUp == nil {
		return "", ErrNoWebConsole
	}
	return w.b.web.stepUp(c, id)
}

// SetItemLink tells the core how to mint a one-time sign-in link that
// lands on item id's page, for that caller only (the console's sign-in
// link, longer-lived: an email carries it).
func (w WebLinks) SetItemLink(link func(c *Caller, id uint64) (string, error)) { w.b.web.item = link }

// ItemSignIn mints a one-time sign-in link to item id's page for caller.
func (w WebLinks) ItemSignIn(c *Caller, id uint64) (string, error) {
	if w.b.web.item == nil {
		return "", ErrNoWebConsole
	}
	return w.b.web.item(c, id)
}

// webItemURL is item id's page in the console, or "" when not public.
func (b *Bot) webItemURL(id uint64) string {
	if b.web.base == "" {
		return ""
	}
	return fmt.Sprintf("%s/ui/items/%d", b.web.base, id)
}

// ItemURL is item id's page in the console, or "" when the console has
// no public URL (web.public_url).
func (w WebLinks) ItemURL(id uint64) string { return w.b.webItemURL(id) }

// SignIn mints a one-time sign-in URL to the web console for
// caller (the `/countersign web` chat command).
func (w WebLinks) SignIn(c *Caller) (string, error) {
	if w.b.web.link == nil {
		return "", ErrNoWebConsole
	}
	return w.b.web.link(c)
}
