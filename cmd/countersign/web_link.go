package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/adapters/web"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// WebLinkArgs are web_link's arguments.
type WebLinkArgs struct {
	Name string `json:"name,omitempty" jsonschema:"the person to sign in: a principal under principals: in the config or a stored person principal; omit for yourself. Naming someone else needs the admin role"`
}

// webLinkTool is web_link: a one-time sign-in link to the console, minted
// by the running server (which holds the store, so a stored principal is
// found without stopping it). A person may ask for their own; only an
// admin may ask for someone else's, and every link minted is audited.
func (a *app) webLinkTool(key []byte, people map[string]web.Person) bot.Tool {
	return bot.Tool{
		Name:        "web_link",
		Description: "Mint a one-time sign-in link to the web console (one use, valid 5 minutes): for yourself, or, as an admin, for the person named. Only people sign in; the link is audited.",
		Capability:  policy.CapRead,
		Args:        WebLinkArgs{},
		Handler: func(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
			name := strings.TrimSpace(args.(*WebLinkArgs).Name)
			self := name == "" || name == c.Caller.Name
			if !self && !policy.Grants(c.Caller.Role, policy.CapAdmin) {
				return bot.Result{}, c.Deny(ctx, fmt.Sprintf("Access denied: a sign-in link for someone else (%s) needs the 'admin' role; your role(s) ['%s'] do not grant it. Ask for your own by leaving out name.", chatName(name), c.Caller.Role))
			}
			var ref string
			var who bot.Principal
			if self {
				who = c.Caller.Principal
				ref = "p:" + who.ID
				if strings.HasPrefix(who.ID, "chat:") || strings.HasPrefix(who.ID, "web:") {
					ref = "c:" + who.Name // a principal of the config
				}
			} else {
				var err error
				if ref, who, err = a.linkTarget(ctx, c, people, name); err != nil {
					return bot.Result{}, err
				}
			}
			if msg := bot.SignInRefusal(who); msg != "" {
				return bot.Result{}, bot.Errorf(bot.KindConflict, "%s", msg)
			}
			if strings.HasPrefix(ref, "c:") {
				if _, ok := people[who.Name]; !ok {
					return bot.Result{}, bot.Errorf(bot.KindConflict, "%s is not under principals: in the config, so the console does not know it", who.Name)
				}
			}
			tok, err := web.MintLink(key, ref, c.Now)
			if err != nil {
				return bot.Result{}, err
			}
			expires := c.Now.Add(web.LinkTTL).UTC()
			if err := c.Update(ctx, func(tx *bot.Tx) error {
				return tx.Audit("web_link", fmt.Sprintf("one-time sign-in link for %s minted, valid until %s", who.Name, expires.Format(time.RFC3339)))
			}); err != nil {
				return bot.Result{}, err
			}
			u := web.SignInURL(webBase(a.cfg), tok)
			return bot.Result{
				Text: u,
				Data: map[string]any{"url": u, "token": tok, "principal": who.Name, "expires_at": expires.Format(time.RFC3339)},
			}, nil
		},
	}
}

// linkTarget finds the person an admin named: a principal of the config
// first, else a stored principal that is not revoked (the newest of that
// name).
func (a *app) linkTarget(ctx context.Context, c *bot.Call, people map[string]web.Person, name string) (string, bot.Principal, error) {
	if p, ok := people[name]; ok {
		pr := p.Principal
		pr.Kind = "person"
		return "c:" + name, pr, nil
	}
	var found []bot.Principal
	err := c.View(ctx, func(tx kv.Tx) error {
		ps, err := bot.ListPrincipals(tx)
		for _, p := range ps {
			if p.Name == name && !p.Revoked {
				found = append(found, p)
			}
		}
		return err
	})
	if err != nil {
		return "", bot.Principal{}, err
	}
	if len(found) == 0 {
		return "", bot.Principal{}, bot.Invalid("name", "no principal %s: it is neither under principals: in the config nor a stored principal that is not revoked", chatName(name))
	}
	p := found[len(found)-1]
	return "p:" + p.ID, p, nil
}

// chatName quotes a name for a message, bounded.
func chatName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// askServerForLink asks the running server at base for a sign-in link
// (web_link) with key, and returns the URL to print: the server's, when
// web.public_url is set, else the link on the address it was reached at.
func askServerForLink(ctx context.Context, cfg *Config, base, key, name string) (string, error) {
	api, err := client.NewAPI(base, key)
	if err != nil {
		return "", fmt.Errorf("web link: %w", err)
	}
	args, _ := json.Marshal(WebLinkArgs{Name: name})
	ans, err := api.Call(ctx, "web_link", json.RawMessage(args))
	var te *client.TransportError
	if errors.As(err, &te) {
		return "", fmt.Errorf("web link: no answer from %s: %v (is `countersign serve` running? Without --key the link is made here, for a principal under principals: in the config)", base, te.Err)
	}
	if err != nil {
		return "", fmt.Errorf("web link: %w", err)
	}
	if !ans.OK() {
		msg := ans.Error
		if msg == "" {
			msg = ans.Text
		}
		return "", fmt.Errorf("web link: the server at %s answered %d: %s", base, ans.Status, msg)
	}
	u, _ := ans.Data["url"].(string)
	tok, _ := ans.Data["token"].(string)
	if u == "" || tok == "" {
		return "", fmt.Errorf("web link: the server's answer holds no link (%s)", strings.TrimSpace(string(ans.Raw)))
	}
	if cfg.Web.PublicURL != "" {
		return u, nil
	}
	return web.SignInURL(base, tok), nil
}
