package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
)

// A suspension takes a principal's power to decide away while their chat
// account is gone: the Slack workspace deactivated or removed them, or
// they left the Discord server (the adapters report it: SuspendAccount),
// or an admin suspended them (suspend_principal). It is stored, so it
// holds on every replica at once: every deciding transaction reads it
// (Bot.Update sets Caller.Suspended from the store), and the one decision
// rule (policy.Decide) refuses a suspended principal everything. Their
// approvals of requests still pending stop counting when the suspension
// is recorded (ItemSource's VoteVoider), and stay void. Only an admin
// lifts a suspension (lift_suspension); a reactivated account does not
// lift it by itself.

// bucketSuspensions holds the suspended principals: lower-cased principal
// name -> Suspension JSON. A principal is suspended by name, so the person
// is suspended on every surface they decide from (chat:NAME, web:NAME, a
// stored person of that name).
const bucketSuspensions = "suspensions"

// Suspension is a principal's suspension from approving.
type Suspension struct {
	// Name is the principal suspended.
	Name string `json:"name"`
	// Surface is where the reason was seen (slack, discord), or "admin".
	Surface string `json:"surface"`
	// Account is the platform account that was deactivated or left
	// ("T0123ABCD/U0123ABC", a Discord user id); "" for an admin's.
	Account string `json:"account,omitempty"`
	// Reason says what happened ("the Slack account was deactivated").
	Reason string `json:"reason"`
	// At is when it was recorded, By who recorded it ("name [id]").
	At time.Time `json:"at"`
	By string    `json:"by"`
}

// Why is the suspension in one line, as the decision rule quotes it:
// "slack: the Slack account was deactivated, 2026-03-02 08:05 UTC".
func (s Suspension) Why() string {
	return OneLine(fmt.Sprintf("%s: %s, %s", s.Surface, s.Reason, s.At.UTC().Format("2006-01-02 15:04 UTC")), 300)
}

// VoteVoider is implemented by the item sources whose items count
// approvals toward a quorum: VoidVotes makes the approvals of the
// principal named name on the open item rec stop counting (why says so),
// and reports whether the item changed, and, when that changed more than
// name's approvals (a request signed off in stages went back to the stage
// that lost one), a note saying so for the item's thread and the audit
// ("" otherwise).
type VoteVoider interface {
	VoidVotes(tx kv.Tx, rec ItemRecord, name, why string) (changed bool, note string, err error)
}

func suspensionKey(name string) []byte { return []byte(strings.ToLower(strings.TrimSpace(name))) }

// LoadSuspension returns the suspension of the principal named name, or
// nil when they are not suspended.
func LoadSuspension(tx kv.Tx, name string) (*Suspension, error) {
	if strings.TrimSpace(name) == "" {
		return nil, nil
	}
	b, err := tx.Get(bucketSuspensions, suspensionKey(name))
	if err != nil || b == nil {
		return nil, err
	}
	var s Suspension
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("suspension of %q: %w", name, err)
	}
	return &s, nil
}

// ListSuspensions returns every suspension, by principal name.
func ListSuspensions(tx kv.Tx) ([]Suspension, error) {
	var out []Suspension
	err := tx.Ascend(bucketSuspensions, nil, nil, func(_, v []byte) error {
		var s Suspension
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// Suspend records s in tx, audited as principal_suspended, and makes the
// principal's approvals of every open item stop counting (each changed
// item's cards are updated). A principal already suspended keeps their
// first suspension: nothing changes, and it reports false.
func (tx *Tx) Suspend(s Suspension) (bool, error) {
	if strings.TrimSpace(s.Name) == "" {
		return false, Invalid("name", "is required: the principal to suspend")
	}
	old, err := LoadSuspension(tx.Tx, s.Name)
	if err != nil || old != nil {
		return false, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	if err := tx.Put(bucketSuspensions, suspensionKey(s.Name), b); err != nil {
		return false, err
	}
	voided, err := tx.voidVotes(s.Name, "suspended from approving: "+s.Why())
	if err != nil {
		return false, err
	}
	if err := tx.runSuspendHooks(s.Name, "suspended from approving: "+s.Why()); err != nil {
		return false, err
	}
	if err := tx.endDelegationsOf(s.Name, "suspended from approving: "+s.Why()); err != nil { // delegations.go
		return false, err
	}
	detail := fmt.Sprintf("%q suspended from approving (%s)", s.Name, s.Why())
	if s.Account != "" {
		detail += "; account " + OneLine(s.Account, 100)
	}
	if len(voided) > 0 {
		detail += fmt.Sprintf("; approvals no longer counting on #%s", joinIDs(voided))
	}
	return true, tx.Audit("principal_suspended", detail)
}

// LiftSuspension ends the suspension of the principal named name in tx,
// audited as suspension_lifted with why. It returns the suspension lifted,
// nil when there was none. Approvals voided by it stay void.
func (tx *Tx) LiftSuspension(name, why string) (*Suspension, error) {
	s, err := LoadSuspension(tx.Tx, name)
	if err != nil || s == nil {
		return nil, err
	}
	if err := tx.Delete(bucketSuspensions, suspensionKey(name)); err != nil {
		return nil, err
	}
	detail := fmt.Sprintf("%q may approve again (was suspended: %s)", s.Name, s.Why())
	if w := OneLine(why, 300); w != "" {
		detail += "; " + w
	}
	return s, tx.Audit("suspension_lifted", detail)
}

// voidVotes asks every open item's source to void name's approvals, and
// updates the cards of the items that changed. It returns their ids.
func (tx *Tx) voidVotes(name, why string) ([]uint64, error) {
	return tx.reviseOpen(func(rec ItemRecord) (bool, string, error) {
		vv, ok := tx.call.bot.kinds[rec.Kind].(VoteVoider)
		if !ok {
			return false, "", nil
		}
		return vv.VoidVotes(tx.Tx, rec, name, why)
	})
}

// reviseOpen runs revise on every open item and updates the cards of the
// items it changed (and their threads and the audit with its note, when
// it gives one: a stage reopened). It returns the ids of the changed items.
func (tx *Tx) reviseOpen(revise func(rec ItemRecord) (changed bool, note string, err error)) ([]uint64, error) {
	var ids []uint64
	if err := tx.Ascend(bucketOpen, nil, nil, func(k, _ []byte) error {
		ids = append(ids, kv.ParseU64(k))
		return nil
	}); err != nil {
		return nil, err
	}
	var changed []uint64
	for _, id := range ids {
		rec, err := LoadItemRecord(tx.Tx, id)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			continue
		}
		did, note, err := revise(*rec)
		if err != nil {
			return nil, err
		}
		if did {
			changed = append(changed, id)
			if err := tx.Emit(id, EventUpdated, ""); err != nil {
				return nil, err
			}
		}
		if note != "" {
			if err := tx.Emit(id, EventNote, note); err != nil {
				return nil, err
			}
			if err := tx.Audit("stage_reopened", fmt.Sprintf("#%d: %s", id, note)); err != nil {
				return nil, err
			}
		}
	}
	return changed, nil
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", #")
}

// suspended reads the caller's suspension in tx into the call: every
// deciding transaction sees the store's word, on every replica.
func (tx *Tx) suspended() error {
	c := tx.call
	if c == nil || c.Caller == nil || strings.TrimSpace(c.Caller.Name) == "" {
		return nil
	}
	s, err := LoadSuspension(tx.Tx, c.Caller.Name)
	if err != nil {
		return err
	}
	why := ""
	if s != nil {
		why = s.Why()
	}
	if why != c.Caller.Suspended {
		cc := *c.Caller // the caller may be shared (a cached key's)
		cc.Suspended = why
		c.Caller = &cc
	}
	return nil
}

// SuspendAccount suspends the principal a chat account is mapped to
// because the platform says the account is gone (deactivated, removed,
// left the server): surface and account as the directory knows them
// (SurfaceSlack with "T…/U…", SurfaceDiscord with a user id). It returns
// the principal's name, "" when the account is not mapped (nothing is
// recorded), and whether a new suspension was recorded.
func (ch Chat) SuspendAccount(ctx context.Context, surface, account, reason string) (name string, recorded bool, err error) {
	b := ch.b
	if b.directory == nil {
		return "", false, nil
	}
	var p ChatPrincipal
	var ok bool
	switch surface {
	case SurfaceSlack:
		p, ok = b.directory.slack[account]
	case SurfaceDiscord:
		p, ok = b.directory.discord[account]
	case SurfaceTeams:
		p, ok = b.directory.teams[strings.ToLower(account)]
	}
	if !ok {
		return "", false, nil
	}
	now := b.now()
	c := &Call{bot: b, Caller: &Caller{Principal: Principal{ID: surface, Name: surface + " directory", Kind: "service"}, Surface: surface}, Now: now, Tool: &Tool{Name: surface}}
	err = b.Update(ctx, c, func(tx *Tx) error {
		var err error
		recorded, err = tx.Suspend(Suspension{Name: p.Name, Surface: surface, Account: account, Reason: reason, At: now, By: c.Caller.String()})
		return err
	})
	return p.Name, recorded, err
}
