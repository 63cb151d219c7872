package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/countersign/countersign/adapters/web"
	"github.com/countersign/countersign/adapters/webhook"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
)

// wireWeb mounts the console under /ui/ and prunes its expired sessions
// with the sweeper.
func (a *app) wireWeb(ctx context.Context) error {
	w := a.cfg.Web
	if !w.Served() {
		return nil
	}
	o, err := w.Options(a.getenv, a.people) // config/web.go: the OIDC secret, the people
	if err != nil {
		return err
	}
	o.Bot, o.LinkKey, o.Logger = a.bot, web.LinkKey(a.key.Seed()), a.log
	h, err := web.New(o)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	a.mounts["/ui/"] = h
	a.trust["/ui/"] = webhook.TrustOwnOrigin // every form post checks Origin (adapters/web)
	// Chat cards link to the item's page when the console has a public
	// URL; chat's `/countersign web`, emails and step-up answer with
	// one-time links (adapters/web/links.go), an email's lasting
	// email.link_ttl.
	base, itemTTL := a.cfg.LinkBase(), web.LinkTTL
	if a.cfg.Email != nil {
		itemTTL = a.cfg.Email.LinkTTL
	}
	h.InstallLinks(base, itemTTL)
	a.bot.OnSweep("web_sessions", h.Prune)
	// GET / is the console's front door (a browser opening the server's
	// address); the API stays under /v1/.
	a.mounts["GET /{$}"] = http.RedirectHandler("/ui/", http.StatusSeeOther)
	return a.bot.Register(h.LinkTool(base))
}

// cmdWebLink prints a one-time, 5-minute sign-in URL for an existing
// principal. With an API key (--key, or $COUNTERSIGN_API_KEY) it asks the
// running server (the web_link tool): for the key's own person, or, with
// an admin key, for anyone named, stored principals too. Without one it
// mints the link here: for a principal under principals: in the config,
// or a stored principal of kind person (the store is then opened, which on
// bbolt needs the server stopped).
func cmdWebLink(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("web link", stderr)
	load := configFlag(fs)
	name := fs.String("name", "", "the principal's name (required without --key; with a key, omit it for the key's own person)")
	keyFlag := fs.String("key", "", "an API key: ask the running server for the link (default $"+apiKeyEnv+"); an admin key may name anyone")
	urlFlag := fs.String("url", "", "the running server's base URL, with a key (default $"+urlEnv+", else http:// and the config's listen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key := apiKey(*keyFlag, getenv, apiKeyEnv)
	if *name == "" && key == "" {
		return errors.New("--name: required: the name of a principal under principals: in the config, or of a stored person principal (or give --key KEY to ask the running server for your own link)")
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if !cfg.Web.Served() {
		return errors.New("web.enabled is false: the console is off, so a sign-in link would lead nowhere")
	}
	if key != "" {
		base, err := serverURL(*urlFlag, func() (*config.Config, error) { return cfg, nil }, getenv)
		if err != nil {
			return err
		}
		u, err := askServerForLink(ctx, cfg, base, key, *name)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, u)
		return nil
	}
	dir, err := cfg.Directory()
	if err != nil {
		return err
	}
	configured := web.PeopleOf(dir)
	var store web.Viewer // a principal not in the config is looked up in the store
	if _, ok := configured[*name]; !ok {
		if cfg.Store.Engine != config.EnginePostgres && !fileExists(cfg.Store.Path) {
			return fmt.Errorf("--name: no principal %q under principals: in the config, and no store at %s", *name, cfg.Store.Path)
		}
		db, err := openEngine(ctx, cfg, getenv, true)
		if err != nil {
			return fmt.Errorf("%w (a principal not in the config is looked up in the store, which needs the server stopped; while it runs, ask it: give --key with the person's own key or an admin's)", err)
		}
		defer db.Close()
		store = db
	}
	ref, _, err := web.LinkTarget(ctx, store, configured, *name)
	if be := (*bot.Error)(nil); errors.As(err, &be) {
		return fmt.Errorf("--name: %s", be.Msg)
	}
	if err != nil {
		return err
	}
	sk, err := approvals.ReadSigningKey(cfg.Audit.SigningKey) // before serve ever ran: start it once
	if err != nil {
		return err
	}
	tok, err := web.MintLink(web.LinkKey(sk.Seed()), ref, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, web.SignInURL(cfg.LinkBase(), tok))
	return nil
}
