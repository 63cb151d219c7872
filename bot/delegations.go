package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// A delegation lends a person's approvals, for a window, to another
// person (policy/delegation.go says what the delegate may then decide: never
// wider than either person's own rights). It is stored, so it holds on every
// replica at once: every deciding transaction of a person reads the
// delegations lent to them (Bot.Update sets Caller.Delegators from the
// store, each delegator as they stand then, their suspension included),
// and the one decision rule decides with them. Setting and ending one is
// audited; a suspension of either person (a SCIM deactivation, a chat
// account gone, an admin's) ends it in the suspending transaction; a
// delegation past its end simply no longer counts.

// bucketDelegations holds the delegations: lower-cased delegator name ->
// Delegation JSON. A person lends their approvals to one delegate at a
// time: a new delegation replaces theirs.
const bucketDelegations = "delegations"

// Delegation is one person's approvals lent to another, as stored.
type Delegation struct {
	policy.Delegation
	// By is who set it ("name [id]"), and Surface where (slack, web, …).
	By      string `json:"by"`
	Surface string `json:"surface,omitempty"`
}

// Line is the delegation as a card shows it: "alice, away; delegated to
// bob until 2026-12-02 18:00 UTC".
func (d Delegation) Line() string {
	return OneLine(fmt.Sprintf("%s, away; delegated to %s until %s", d.From, d.To, d.Until.UTC().Format("2006-01-02 15:04 UTC")), 300)
}

// DecidableSource is implemented by the item sources whose items a
// delegate may decide (policy.Decidable.Delegable: action and consent
// requests), with who may decide them (their approvers, their open
// stage): a card shows a delegation only on the items its delegator may
// decide. ok is false for an item no one decides any more.
type DecidableSource interface {
	Decidable(tx kv.Tx, rec ItemRecord) (it policy.Decidable, ok bool, err error)
}

// Delegations are the delegations of approvals, as every surface sets,
// ends and reads them. Reach them with Bot.Delegations.
type Delegations struct{ b *Bot }

// Delegations returns the bot's delegations.
func (b *Bot) Delegations() Delegations { return Delegations{b: b} }

func delegationKey(name string) []byte { return []byte(strings.ToLower(strings.TrimSpace(name))) }

// loadDelegations reads every stored delegation (running or not), by
// delegator.
func loadDelegations(tx kv.Tx) ([]Delegation, error) {
	var out []Delegation
	err := tx.Ascend(bucketDelegations, nil, nil, func(_, v []byte) error {
		var d Delegation
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("delegation: %w", err)
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// running are the delegations of ds that run at now.
func running(ds []Delegation, now time.Time) []Delegation {
	var out []Delegation
	for _, d := range ds {
		if d.ActiveAt(now) {
			out = append(out, d)
		}
	}
	return out
}

// Running lists the delegations that run now, by delegator.
func (x Delegations) Running(ctx context.Context) ([]Delegation, error) {
	var out []Delegation
	err := x.b.store.View(ctx, func(tx kv.Tx) error {
		ds, err := loadDelegations(tx)
		out = running(ds, x.b.now())
		return err
	})
	return out, err
}

// people resolves people by name within one transaction, as the one
// decision rule sees them now (person): the store's principals are read
// at most once, however many names are asked.
type people struct {
	b      *Bot
	tx     kv.Tx
	stored []Principal
	read   bool
}

// person returns the person named name as the one decision rule sees
// them now: a principal of config.yaml (its role and scopes) or a person
// stored in the store (provisioned by the directory, or created with a
// key), with the configured groups and on-call turns they hold now and
// their suspension; nil when there is no such person (or the name is
// shared by two stored ones). Names compare case-insensitively.
func (ps *people) person(name string) (*Caller, error) {
	b, tx := ps.b, ps.tx
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, nil
	}
	if d := b.directory; d != nil {
		cp, ok := d.byName[name]
		if !ok {
			for n, p := range d.byName {
				if strings.EqualFold(n, name) {
					cp, ok = p, true
					break
				}
			}
		}
		if ok {
			return withSuspension(tx, b, b.withGroups(&Caller{Principal: cp.Principal()}))
		}
	}
	if !ps.read {
		all, err := ListPrincipals(tx)
		if err != nil {
			return nil, err
		}
		ps.stored, ps.read = all, true
	}
	var found *Principal
	for i := range ps.stored {
		p := &ps.stored[i]
		if p.Kind == "person" && !p.Revoked && strings.EqualFold(p.Name, name) {
			if found != nil {
				return nil, nil // two people of one name: neither
			}
			found = p
		}
	}
	if found == nil {
		return nil, nil
	}
	return withSuspension(tx, b, b.withGroups(&Caller{Principal: *found}))
}

// delegated reads, in a deciding transaction of a person, the delegations
// lent to them that run at the call's time, each delegator as they stand
// now, into the call's caller (Caller.Delegators). A transaction that
// decides nothing (a tool without the approve capability) reads none, so
// it costs no extra read.
func (tx *Tx) delegated() error {
	c := tx.call
	if c == nil || c.Caller == nil || c.Caller.Kind != "person" || strings.TrimSpace(c.Caller.Name) == "" || !decides(c.Tool) {
		return nil
	}
	ds, err := loadDelegations(tx.Tx)
	if err != nil {
		return err
	}
	var lent []policy.Delegator
	ps := &people{b: c.bot, tx: tx.Tx}
	for _, d := range running(ds, c.Now) {
		if !strings.EqualFold(d.To, c.Caller.Name) {
			continue
		}
		p, err := ps.person(d.From)
		if err != nil {
			return err
		}
		if p == nil {
			continue // the delegator is gone: nothing to lend
		}
		lent = append(lent, policy.Delegator{Decider: p.Decider(), Until: d.Until})
	}
	if len(lent) == 0 && len(c.Caller.Delegators) == 0 {
		return nil
	}
	cc := *c.Caller // the caller may be shared (a cached key's)
	cc.Delegators = lent
	c.Caller = &cc
	return nil
}

// decides reports whether a call of t may take a decision: a tool that
// needs the approve capability, or Bot.Decide's transaction (which runs
// the decision tool in it).
func decides(t *Tool) bool {
	return t != nil && (t.Capability == policy.CapApprove || t.Name == decideCall)
}

// decideCall names the call of Bot.Decide's transaction (decide.go).
const decideCall = "decide"

// Set lends caller's approvals to the person named to until until: the
// caller and the delegate must both be unsuspended people whose role holds
// approve, the delegate not away themselves, the window within
// policy.MaxDelegation. It replaces a delegation the caller had, is
// audited as delegation_set, and refreshes the cards of the open items
// the caller may decide.
func (x Delegations) Set(ctx context.Context, caller *Caller, to string, until time.Time) (Delegation, error) {
	b := x.b
	var out Delegation
	var denied *Error
	c := &Call{bot: b, Caller: caller, Now: b.now(), Tool: &Tool{Name: "delegate"}}
	err := b.Update(ctx, c, func(tx *Tx) error {
		me := c.Caller
		denied = nil
		if err := mayLend(me, "delegate your approvals"); err != nil {
			errors.As(err, &denied)
			return err
		}
		if why := policy.CheckWindow(c.Now, until); why != "" {
			return Invalid("until", "%s", why)
		}
		if policy.SamePrincipal("", me.Name, "", to) {
			return Invalid("to", "you cannot delegate your approvals to yourself; name the person who decides for you while you are away")
		}
		dp, err := (&people{b: b, tx: tx.Tx}).person(to)
		if err != nil {
			return err
		}
		if dp == nil {
			return Invalid("to", "no person named %q: name a principal of config.yaml (principals[].name) or a person the directory provisioned", OneLine(to, 64))
		}
		if err := mayLend(dp, ""); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return Invalid("to", "%s cannot take your approvals: %s", dp.Name, e.Msg)
			}
			return err
		}
		ds, err := loadDelegations(tx.Tx)
		if err != nil {
			return err
		}
		var replaced *Delegation
		for _, d := range running(ds, c.Now) {
			switch {
			case strings.EqualFold(d.From, dp.Name):
				return Invalid("to", "%s is away too (%s): a delegation is not passed on, so name someone who is here", dp.Name, d.Line())
			case strings.EqualFold(d.From, me.Name):
				replaced = &d
			}
		}
		out = Delegation{Delegation: policy.Delegation{From: me.Name, To: dp.Name, Start: c.Now.UTC(), Until: until.UTC()}, By: me.String(), Surface: me.Surface}
		v, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if err := tx.Put(bucketDelegations, delegationKey(me.Name), v); err != nil {
			return err
		}
		detail := fmt.Sprintf("%s lends their approvals to %s until %s (%s)", me.Name, dp.Name, out.Until.Format("2006-01-02 15:04 UTC"), me.Surface)
		if replaced != nil {
			detail += fmt.Sprintf("; replaces the delegation to %s until %s", replaced.To, replaced.Until.UTC().Format("2006-01-02 15:04 UTC"))
		}
		if err := tx.Audit("delegation_set", detail); err != nil {
			return err
		}
		return tx.refreshOpenItems(me.Name)
	})
	if denied != nil {
		return Delegation{}, c.Deny(ctx, denied.Msg) // the refusal, audited
	}
	return out, err
}

// mayLend checks that p may lend or take approvals: an identified,
// unsuspended person whose role holds approve. what names the act in the
// refusal of the caller ("" for the delegate: the reason alone).
func mayLend(p *Caller, what string) error {
	var why string
	switch {
	case p == nil || strings.TrimSpace(p.Name) == "":
		why = "there is no authenticated person"
	case p.Kind != "person":
		why = fmt.Sprintf("%s is a%s %s principal, and only people decide", p.Name, anAgent(p.Kind), p.Kind)
	case !policy.Grants(p.Role, policy.CapApprove):
		why = fmt.Sprintf("the role %s does not hold approve", p.Role)
	case strings.TrimSpace(p.Suspended) != "":
		why = fmt.Sprintf("%s is suspended from approving (%s)", p.Name, p.Suspended)
	}
	if why == "" {
		return nil
	}
	if what == "" {
		return Errorf(KindDenied, "%s", why)
	}
	return Errorf(KindDenied, "Access denied: you cannot %s: %s. Only a person who may approve lends their approvals.", what, why)
}

func anAgent(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "n"
	}
	return ""
}

// End ends the delegation of the person named from (caller's own when
// from is ""), at once: the delegator, the delegate, or an admin may end
// it. why is recorded with it. It returns the delegation ended, nil when
// from had none running.
func (x Delegations) End(ctx context.Context, caller *Caller, from, why string) (*Delegation, error) {
	b := x.b
	var out *Delegation
	var denied *Error
	c := &Call{bot: b, Caller: caller, Now: b.now(), Tool: &Tool{Name: "delegate"}}
	err := b.Update(ctx, c, func(tx *Tx) error {
		out, denied = nil, nil
		me := c.Caller
		if me == nil || strings.TrimSpace(me.Name) == "" || me.Kind != "person" && !me.MayAdminister() {
			denied = Errorf(KindDenied, "Access denied: ending a delegation needs an authenticated person (the delegator, the delegate) or an admin.")
			return denied
		}
		if strings.TrimSpace(from) == "" {
			from = me.Name
		}
		v, err := tx.Get(bucketDelegations, delegationKey(from))
		if err != nil || v == nil {
			return err
		}
		var d Delegation
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("delegation of %q: %w", from, err)
		}
		if !d.ActiveAt(c.Now) {
			return tx.Delete(bucketDelegations, delegationKey(from)) // past: tidied, nothing to end
		}
		mine := policy.SamePrincipal("", me.Name, "", d.From) || policy.SamePrincipal("", me.Name, "", d.To)
		if !mine && !me.MayAdminister() {
			denied = Errorf(KindDenied, "Access denied: the delegation of %s to %s is ended by %s, %s or an admin.", d.From, d.To, d.From, d.To)
			return denied
		}
		out = &d
		w := OneLine(why, 300)
		if w == "" {
			w = "ended by " + me.String()
		}
		return tx.endDelegation(d, w)
	})
	if denied != nil {
		return nil, c.Deny(ctx, denied.Msg) // the refusal, audited
	}
	return out, err
}

// endDelegation deletes running delegation d, audited as
// delegation_ended with why, and refreshes the cards it showed on.
func (tx *Tx) endDelegation(d Delegation, why string) error {
	if err := tx.Delete(bucketDelegations, delegationKey(d.From)); err != nil {
		return err
	}
	if err := tx.Audit("delegation_ended", fmt.Sprintf("%s no longer lends their approvals to %s (was until %s): %s", d.From, d.To, d.Until.UTC().Format("2006-01-02 15:04 UTC"), why)); err != nil {
		return err
	}
	return tx.refreshOpenItems(d.From)
}

// expireDelegations is the "delegations" sweep step: it ends every
// delegation whose time has come at now, audited as delegation_ended, so
// the cards that showed it are updated (the rule stopped counting it at
// its end already). It writes only when one has ended.
func (b *Bot) expireDelegations(ctx context.Context, now time.Time) (int, error) {
	var due int
	if err := b.store.View(ctx, func(tx kv.Tx) error {
		ds, err := loadDelegations(tx)
		for _, d := range ds {
			if !now.Before(d.Until) {
				due++
			}
		}
		return err
	}); err != nil || due == 0 {
		return 0, err
	}
	n := 0
	err := b.Update(ctx, b.SystemCall(now), func(tx *Tx) error {
		n = 0
		ds, err := loadDelegations(tx.Tx)
		if err != nil {
			return err
		}
		var ended []string
		for _, d := range ds {
			if now.Before(d.Until) {
				continue
			}
			if err := tx.Delete(bucketDelegations, delegationKey(d.From)); err != nil {
				return err
			}
			if err := tx.Audit("delegation_ended", fmt.Sprintf("%s no longer lends their approvals to %s: its time came (%s)", d.From, d.To, d.Until.UTC().Format("2006-01-02 15:04 UTC"))); err != nil {
				return err
			}
			n++
			ended = append(ended, d.From)
		}
		return tx.refreshOpenItems(ended...)
	})
	return n, err
}

// endDelegationsOf ends, in a suspending transaction, every running
// delegation from or to the person named name: a suspended person neither
// lends nor takes approvals (the rule refuses them anyway; this ends the
// record, so the cards and the audit say so).
func (tx *Tx) endDelegationsOf(name, why string) error {
	ds, err := loadDelegations(tx.Tx)
	if err != nil {
		return err
	}
	for _, d := range running(ds, tx.now()) {
		if strings.EqualFold(d.From, name) || strings.EqualFold(d.To, name) {
			if err := tx.endDelegation(d, fmt.Sprintf("%s was %s", name, why)); err != nil {
				return err
			}
		}
	}
	return nil
}

// refreshOpenItems queues an update of the cards of every open item one
// of the delegators named may decide (as they stand, a suspension aside:
// the item showed their delegation until now), so that a delegation set
// or ended shows on them at once, and no other card is touched. It reads
// the open items, like a suspension's voided votes.
func (tx *Tx) refreshOpenItems(delegators ...string) error {
	b := tx.call.bot
	ps := &people{b: b, tx: tx.Tx}
	var who []policy.Decider
	for _, name := range delegators {
		p, err := ps.person(name)
		if err != nil {
			return err
		}
		if p != nil {
			d := p.Decider()
			d.Suspended = ""
			who = append(who, d)
		}
	}
	if len(who) == 0 {
		return nil
	}
	var ids []uint64
	if err := tx.Ascend(bucketOpen, nil, nil, func(k, _ []byte) error {
		ids = append(ids, kv.ParseU64(k))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		rec, err := LoadItemRecord(tx.Tx, id)
		if err != nil {
			return err
		}
		if rec == nil {
			continue
		}
		src, ok := b.kinds[rec.Kind].(DecidableSource)
		if !ok {
			continue
		}
		dec, ok, err := src.Decidable(tx.Tx, *rec)
		if err != nil {
			return err
		}
		if !ok || !dec.Delegable {
			continue
		}
		dec.StepUp, dec.MinAssurance, dec.At = 0, "", time.Time{}
		if !slices.ContainsFunc(who, func(d policy.Decider) bool { return policy.Decide(d, dec) == nil }) {
			continue
		}
		if err := tx.Emit(id, EventUpdated, ""); err != nil {
			return err
		}
	}
	return nil
}

// maxDelegationLines bounds the delegations one card shows.
const maxDelegationLines = 5

// delegationFields are the card lines of the running delegations whose
// delegator may decide pending item rec: "alice, away; delegated to bob
// until …", each checked with the one decision rule (the delegator as
// they stand now; their session aside).
func (b *Bot) delegationFields(tx kv.Tx, rec *ItemRecord, it Item) ([]Field, error) {
	if !it.Pending() {
		return nil, nil
	}
	ds, err := loadDelegations(tx)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	ds = running(ds, b.now())
	if len(ds) == 0 {
		return nil, nil
	}
	src, ok := b.kinds[rec.Kind].(DecidableSource)
	if !ok {
		return nil, nil // an item no delegation reaches
	}
	dec, ok, err := src.Decidable(tx, *rec)
	if err != nil || !ok || !dec.Delegable {
		return nil, err
	}
	dec.StepUp, dec.MinAssurance, dec.At = 0, "", time.Time{}
	sort.Slice(ds, func(i, j int) bool { return ds[i].From < ds[j].From })
	var out []Field
	ps := &people{b: b, tx: tx}
	for _, d := range ds {
		p, err := ps.person(d.From)
		if err != nil {
			return nil, err
		}
		if p == nil || policy.Decide(p.Decider(), dec) != nil {
			continue
		}
		if slices.ContainsFunc(out, func(f Field) bool { return f.Value == d.Line() }) {
			continue
		}
		out = append(out, Field{Label: "Delegated", Value: d.Line()})
		if len(out) == maxDelegationLines {
			break
		}
	}
	return out, nil
}

// OnCallNow is who is on call in the rotation named rotation (oncall: in
// config.yaml; the name compared case-insensitively) at at: "" when there
// is no such rotation, or nobody is on call then.
func (b *Bot) OnCallNow(rotation string, at time.Time) string {
	for name, r := range b.onCall {
		if strings.EqualFold(name, rotation) {
			return r.OnCall(at)
		}
	}
	return ""
}

// Account returns the platform account of the configured person named
// name on surface (SurfaceSlack: the Slack user id, without its
// workspace; SurfaceDiscord: the Discord user id; SurfaceTeams: the Entra
// object id), or "" when the person has none there: an escalation to the
// person on call mentions them.
func (ch Chat) Account(surface, name string) string {
	d := ch.b.directory
	if d == nil {
		return ""
	}
	p, ok := d.byName[name]
	if !ok {
		for n, q := range d.byName {
			if strings.EqualFold(n, name) {
				p, ok = q, true
				break
			}
		}
	}
	if !ok {
		return ""
	}
	switch surface {
	case SurfaceSlack:
		return p.Slack[strings.LastIndexByte(p.Slack, '/')+1:]
	case SurfaceDiscord:
		return p.Discord
	case SurfaceTeams:
		return p.Teams
	}
	return ""
}

// PersonOf returns the name of the configured person whose account on
// surface is account (a Slack user id, with or without its workspace,
// the workspace then taken from within: the typing user's; a Discord
// user id; an Entra object id), or "": how a chat command's mention
// (<@U0123ABC>) names a person.
func (ch Chat) PersonOf(surface, account, within string) string {
	d := ch.b.directory
	if d == nil || account == "" {
		return ""
	}
	switch surface {
	case SurfaceSlack:
		if !strings.Contains(account, "/") {
			if i := strings.LastIndexByte(within, '/'); i > 0 {
				account = within[:i] + "/" + account
			}
		}
		return d.slack[account].Name
	case SurfaceDiscord:
		return d.discord[account].Name
	case SurfaceTeams:
		return d.teams[strings.ToLower(account)].Name
	}
	return ""
}

// MayLend reports whether the caller may lend their approvals (an
// unsuspended person whose role holds approve), and why not.
func (c *Caller) MayLend() (why string, ok bool) {
	if err := mayLend(c, ""); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e.Msg, false
		}
		return err.Error(), false
	}
	return "", true
}
