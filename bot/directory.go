package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// ChatPrincipal maps chat identities to a principal who decides from chat.
type ChatPrincipal struct {
	Name string
	Role policy.Role
	// Slack is the Slack user qualified by their workspace,
	// "T0123ABCD/U0123ABC" (an Enterprise Grid org's users "E…/W…"): the
	// Slack adapter looks users up by workspace and user id, so a user id
	// alone, or the same id in another workspace, matches nobody.
	Slack        string
	Discord      string   // Discord user id (snowflake)
	DiscordRoles []string // Discord role ids whose members act as this principal
	// Teams is the person's Entra object id (a GUID; compared without
	// regard to letter case), as Microsoft Teams reports who clicked.
	Teams string
	// Scopes are the memory spaces (user_ids) the person may see and decide
	// for, as a key's scopes; empty means every space.
	Scopes []string
	// Web is the OIDC claim value (an email by default) that signs in to
	// the web console as this person.
	Web string
	// Email is where an escalation or a reminder by email reaches them.
	Email string
}

// Principal is the principal the configured person acts as from chat
// (a click, a command, a delegation made there) and the one an email
// addresses: id "chat:NAME", kind person, with the role and scopes the
// config gives.
func (p ChatPrincipal) Principal() Principal {
	return Principal{ID: "chat:" + p.Name, Name: p.Name, Role: p.Role, Kind: "person", Scopes: p.Scopes}
}

// WebPrincipal is the principal the configured person acts as in the web
// console and with an OAuth access token: id "web:NAME", otherwise as
// Principal. Chat().Current reads either id back to the person.
func (p ChatPrincipal) WebPrincipal() Principal {
	w := p.Principal()
	w.ID = "web:" + p.Name
	return w
}

// Directory is the one answer to "who is this person" for the people the
// configuration declares, on every surface: chat users to principals
// (Chat().Caller), a name to the person as configured now (Person,
// Chat().Current), everyone with their identities (People: the console's
// sign-ins, Slack's approvers), and a directory user to the person
// (Match: SCIM). It is built from config.
type Directory struct {
	people       []ChatPrincipal // in the config's order
	byName       map[string]ChatPrincipal
	slack        map[string]ChatPrincipal
	discord      map[string]ChatPrincipal
	discordRoles map[string]ChatPrincipal
	teams        map[string]ChatPrincipal
}

// NewDirectory indexes the chat principals. A chat id mapped twice is an error.
func NewDirectory(ps []ChatPrincipal) (*Directory, error) {
	d := &Directory{byName: map[string]ChatPrincipal{}, slack: map[string]ChatPrincipal{}, discord: map[string]ChatPrincipal{}, discordRoles: map[string]ChatPrincipal{}, teams: map[string]ChatPrincipal{}}
	for _, p := range ps {
		d.people = append(d.people, p)
		d.byName[p.Name] = p
		if p.Slack != "" {
			if o, dup := d.slack[p.Slack]; dup {
				return nil, fmt.Errorf("slack user %s is mapped to both %s and %s", p.Slack, o.Name, p.Name)
			}
			d.slack[p.Slack] = p
		}
		if p.Discord != "" {
			if o, dup := d.discord[p.Discord]; dup {
				return nil, fmt.Errorf("discord user %s is mapped to both %s and %s", p.Discord, o.Name, p.Name)
			}
			d.discord[p.Discord] = p
		}
		if id := strings.ToLower(p.Teams); id != "" {
			if o, dup := d.teams[id]; dup {
				return nil, fmt.Errorf("teams user %s is mapped to both %s and %s", p.Teams, o.Name, p.Name)
			}
			d.teams[id] = p
		}
		for _, r := range p.DiscordRoles {
			if o, dup := d.discordRoles[r]; dup {
				return nil, fmt.Errorf("discord role %s is mapped to both %s and %s", r, o.Name, p.Name)
			}
			d.discordRoles[r] = p
		}
	}
	return d, nil
}

// Person returns the configured person named name.
func (d *Directory) Person(name string) (ChatPrincipal, bool) {
	if d == nil {
		return ChatPrincipal{}, false
	}
	p, ok := d.byName[name]
	return p, ok
}

// People returns every configured person, in the config's order.
func (d *Directory) People() []ChatPrincipal {
	if d == nil {
		return nil
	}
	return append([]ChatPrincipal(nil), d.people...)
}

// Match returns the name of the configured person a directory user (an
// identity provider's, over SCIM) is, or "": a user is that person when
// their userName is its name, or their userName or one of their email
// addresses is its email or web identity (case-insensitive). The
// configuration is authoritative where both exist.
func (d *Directory) Match(userName string, emails []string) string {
	if d == nil {
		return ""
	}
	for _, p := range d.people {
		if strings.EqualFold(p.Name, userName) {
			return p.Name
		}
	}
	ids := append([]string{userName}, emails...)
	for _, p := range d.people {
		for _, id := range ids {
			id = strings.TrimSpace(id)
			if id != "" && (strings.EqualFold(p.Email, id) || strings.EqualFold(p.Web, id)) {
				return p.Name
			}
		}
	}
	return ""
}

// Chat is the bot's side of the chat surfaces: who a chat user is (the
// directory lookup) and the audit records of what chat users do outside a
// tool call. Reach it with Bot.Chat. It is an accessor, as Items is: it
// holds nothing but the bot, and groups what only the chat surfaces use,
// so that *Bot's own methods stay the paths every call takes.
type Chat struct{ b *Bot }

// Chat returns the bot's chat directory and chat audit.
func (b *Bot) Chat() Chat { return Chat{b: b} }

// SetDirectory installs the chat directory. Call it while wiring, before
// the bot serves.
func (ch Chat) SetDirectory(d *Directory) { ch.b.directory = d }

func chatCaller(p ChatPrincipal, surface, chatID string) *Caller {
	if surface == SurfaceSlack {
		// Shown as "name [U0123ABC]": the principal's workspace is the
		// config's, the user id is what people recognise.
		chatID = chatID[strings.LastIndexByte(chatID, '/')+1:]
	}
	return &Caller{
		Principal: p.Principal(),
		Surface:   surface,
		ChatID:    chatID,
	}
}

// The chat surfaces the directory knows.
const (
	SurfaceSlack   = "slack"
	SurfaceDiscord = "discord"
	SurfaceTeams   = "teams"
)

// Caller returns the caller a chat user acts as on surface (SurfaceSlack,
// SurfaceDiscord or SurfaceTeams, whose users are Entra object ids), or nil if the user is not mapped: a direct user
// mapping first, else the first of the user's platform roles that is
// mapped (Discord roles). The caller carries the principal's role and
// scopes, and is always a person.
func (ch Chat) Caller(surface, userID string, roles []string) *Caller {
	b := ch.b
	if b.directory == nil || userID == "" {
		return nil
	}
	var users, byRole map[string]ChatPrincipal
	switch surface {
	case SurfaceSlack:
		users = b.directory.slack
	case SurfaceDiscord:
		users, byRole = b.directory.discord, b.directory.discordRoles
	case SurfaceTeams:
		users, userID = b.directory.teams, strings.ToLower(userID)
	default:
		return nil
	}
	if p, ok := users[userID]; ok {
		return chatCaller(p, surface, userID)
	}
	for _, r := range roles {
		if p, ok := byRole[r]; ok {
			return chatCaller(p, surface, userID)
		}
	}
	return nil
}

// Current returns the principal recorded as id as it stands now, or nil
// when it no longer may act: a configured person (recorded as chat:NAME or
// web:NAME) must still be in the directory, with the role and scopes the
// config gives now; a stored principal (prin_…) must still exist, be
// unrevoked and be a person; either carries its suspension, if any
// (suspensions.go). A standing decision a person made (a grant)
// is checked against it with the one decision rule (Caller.MayDecide), so
// removing, revoking, demoting or rescoping the person, or changing who
// may approve, ends it at once, on every replica.
func (ch Chat) Current(tx kv.Tx, id string) (*Caller, error) {
	name, ok := strings.CutPrefix(id, "chat:")
	if !ok {
		name, ok = strings.CutPrefix(id, "web:")
	}
	if ok {
		d := ch.b.directory
		if d == nil {
			return nil, nil
		}
		cp, found := d.byName[name]
		if !found {
			return nil, nil
		}
		return withSuspension(tx, ch.b, ch.b.withGroups(&Caller{Principal: Principal{ID: id, Name: cp.Name, Role: cp.Role, Kind: "person", Scopes: cp.Scopes}}))
	}
	p, err := LoadPrincipal(tx, id)
	if err != nil || p == nil || p.Revoked || p.Kind != "person" {
		return nil, err
	}
	return withSuspension(tx, ch.b, ch.b.withGroups(&Caller{Principal: *p}))
}

// withSuspension sets c.Suspended from the store (suspensions.go), and
// the directory's groups of c (withDirectory, people.go): the person as
// the one rule sees them now.
func withSuspension(tx kv.Tx, b *Bot, c *Caller) (*Caller, error) {
	c, err := withDirectory(tx, b, c)
	if err != nil {
		return nil, err
	}
	s, err := LoadSuspension(tx, c.Name)
	if err != nil {
		return nil, err
	}
	if s != nil {
		c.Suspended = s.Why()
	}
	return c, nil
}

// Deny records a refused chat attempt (an unmapped or unauthorised
// clicker) in the audit chain, with the chat identity as the principal.
func (ch Chat) Deny(ctx context.Context, surface, chatID, what string) error {
	b := ch.b
	c := &Call{bot: b, Caller: &Caller{Principal: Principal{Name: "unmapped", ID: surface}, Surface: surface, ChatID: chatID}, Now: b.now(), Tool: &Tool{Name: surface}}
	return b.Update(ctx, c, func(tx *Tx) error {
		return tx.Audit("access_denied", surface+": "+what)
	})
}

// Audit records something a mapped chat user (or a person signed in to
// the web console) did outside a tool call (a refused command, a view of a
// sensitive item's detail, a sign-in), as that person.
func (ch Chat) Audit(ctx context.Context, caller *Caller, sp Space, action, detail string) error {
	b := ch.b
	c := &Call{bot: b, Caller: caller, Space: sp, Now: b.now(), Tool: &Tool{Name: caller.Surface}}
	return b.Update(ctx, c, func(tx *Tx) error { return tx.Audit(action, detail) })
}

// AuditNote appends one audit entry made by caller outside a tool call
// and, when item is not 0, posts note in the threads of the item's cards,
// in one transaction (the MCP gateway's "outcome unknown" after a crash).
// first, when not nil, runs first in that transaction (dropping the
// gateway's marker); its error aborts it and is returned.
func (ch Chat) AuditNote(ctx context.Context, caller *Caller, sp Space, action, detail string, item uint64, note string, first func(kv.Tx) error) error {
	b := ch.b
	c := &Call{bot: b, Caller: caller, Space: sp, Now: b.now(), Tool: &Tool{Name: caller.Surface}}
	return b.Update(ctx, c, func(tx *Tx) error {
		if first != nil {
			if err := first(tx.Tx); err != nil {
				return err
			}
		}
		if err := tx.Audit(action, detail); err != nil {
			return err
		}
		if item == 0 || note == "" {
			return nil
		}
		return tx.Emit(item, EventNote, note)
	})
}

// AuditRead records a read-only answer caller got outside a tool call (an
// MCP gateway's pass-through) as Call.AuditRead records a read verdict:
// queued while a ReadAudit runs, else in its own durable transaction. An
// *unrecordedError means the answer must not be given.
func (ch Chat) AuditRead(ctx context.Context, caller *Caller, sp Space, action, detail string) error {
	b := ch.b
	c := &Call{bot: b, Caller: caller, Space: sp, Now: b.now(), Tool: &Tool{Name: caller.Surface}}
	return c.AuditRead(ctx, action, detail)
}
