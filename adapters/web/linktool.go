package web

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// LinkArgs are web_link's arguments.
type LinkArgs struct {
	Name string `json:"name,omitempty" jsonschema:"the person to sign in: a principal under principals: in the config or a stored person principal; omit for yourself. Naming someone else needs the admin role"`
}

// LinkTool is the web_link tool: a one-time sign-in link to the console,
// minted by the running server (which holds the store, so a stored
// principal is found without stopping it; `countersign web link --key`
// calls it). A person may ask for their own; only an admin may ask for
// someone else's, and every link minted is audited. base starts the URL
// it answers (web.public_url, else the listen address).
func (h *Handler) LinkTool(base string) bot.Tool {
	key, people := h.o.LinkKey, h.o.People
	return bot.Tool{
		Name:        "web_link",
		Description: "Mint a one-time sign-in link to the web console (one use, valid 5 minutes): for yourself, or, as an admin, for the person named. Only people sign in; the link is audited.",
		Capability:  "read", // a person's own link; someone else's needs admin (below)
		Args:        LinkArgs{},
		Handler: func(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
			name := strings.TrimSpace(args.(*LinkArgs).Name)
			self := name == "" || name == c.Caller.Name
			if !self && !c.Caller.MayAdminister() {
				return bot.Result{}, c.Deny(ctx, fmt.Sprintf("Access denied: a sign-in link for someone else (%s) needs the 'admin' role; your role(s) ['%s'] do not grant it. Ask for your own by leaving out name.", quotedName(name), c.Caller.Role))
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
				if ref, who, err = linkTarget(ctx, c, people, name); err != nil {
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
			tok, err := MintLink(key, ref, c.Now)
			if err != nil {
				return bot.Result{}, err
			}
			expires := c.Now.Add(LinkTTL).UTC()
			if err := c.Update(ctx, func(tx *bot.Tx) error {
				return tx.Audit("web_link", fmt.Sprintf("one-time sign-in link for %s minted, valid until %s", who.Name, expires.Format(time.RFC3339)))
			}); err != nil {
				return bot.Result{}, err
			}
			u := SignInURL(base, tok)
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
func linkTarget(ctx context.Context, c *bot.Call, people map[string]Person, name string) (string, bot.Principal, error) {
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
		return "", bot.Principal{}, bot.Invalid("name", "no principal %s: it is neither under principals: in the config nor a stored principal that is not revoked", quotedName(name))
	}
	p := found[len(found)-1]
	return "p:" + p.ID, p, nil
}

// quotedName quotes a name for a message (Go syntax, so nothing in it
// is invisible), at most 64 bytes of it.
func quotedName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}
