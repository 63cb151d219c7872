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
			ref, who, err := "", c.Caller.Principal, error(nil)
			if self {
				ref = "p:" + who.ID
				if strings.HasPrefix(who.ID, "chat:") || strings.HasPrefix(who.ID, "web:") {
					ref = "c:" + who.Name // a principal of the config
				}
				err = signInConflict(who)
			} else {
				ref, who, err = LinkTarget(ctx, c, people, name)
			}
			if err != nil {
				return bot.Result{}, err
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

// Viewer reads a store: a *bot.Bot, a *bot.Call, or a kv.Store opened by
// a command.
type Viewer interface {
	View(ctx context.Context, fn func(kv.Tx) error) error
}

// LinkTarget is the one answer to "whom is a sign-in link for name for",
// for the web_link tool and `countersign web link` alike: a person under
// principals: in the config (people) first, else the principal of that
// name in the store (v; nil when the command has no store to read) that is
// not revoked (bot.PrincipalByName: a name two such principals share names
// neither, a conflict). It returns the reference the link carries ("c:" and
// the name, or "p:" and the stored id) and the principal, or why there is
// no link: a *bot.Error of kind invalid (field name) when nobody has the
// name, of kind conflict carrying the *bot.SignInRefusal when they may not
// sign in (an agent, a service, the role agent).
func LinkTarget(ctx context.Context, v Viewer, people map[string]Person, name string) (string, bot.Principal, error) {
	if p, ok := people[name]; ok {
		pr := p.Principal
		pr.Kind = "person"
		if err := signInConflict(pr); err != nil {
			return "", bot.Principal{}, err
		}
		return "c:" + name, pr, nil
	}
	noOne := bot.Invalid("name", "no principal %s: it is neither under principals: in the config nor a stored principal that is not revoked", quotedName(name))
	if v == nil {
		return "", bot.Principal{}, noOne
	}
	var stored *bot.Principal
	err := v.View(ctx, func(tx kv.Tx) error {
		var err error
		stored, err = bot.PrincipalByName(tx, name)
		return err
	})
	if bot.KindOf(err) == bot.KindNotFound {
		return "", bot.Principal{}, noOne
	}
	if err != nil {
		return "", bot.Principal{}, err
	}
	if err := signInConflict(*stored); err != nil {
		return "", bot.Principal{}, err
	}
	return "p:" + stored.ID, *stored, nil
}

// signInConflict is nil when p may sign in, else the refusal as a tool's
// error (kind conflict: the principal exists, and may not sign in).
func signInConflict(p bot.Principal) error {
	if r := bot.CheckSignIn(p); r != nil {
		return &bot.Error{Kind: bot.KindConflict, Msg: r.Message, Err: r}
	}
	return nil
}

// quotedName quotes a name for a message (Go syntax, so nothing in it
// is invisible), at most 64 bytes of it.
func quotedName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}
