package bot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// This file is what the core keeps about people beyond config.yaml:
// suspensions (a person the organisation's directory deactivated, or a
// chat platform removed, decides nothing until reinstated), people
// provisioned from the directory (stored principals of kind person), and
// the directory's groups. All of it lives in the store, so every replica
// reads the same state in the transaction that decides.

// People buckets.
const (
	bucketSuspensions = "people_suspensions" // lower(name) 0x00 source -> Suspension JSON
	bucketDirGroups   = "people_groups"      // lower(group name) -> DirectoryGroup JSON
)

// Suspension says that a person may not decide: who suspended them
// (Source: "scim" for the directory) and why, since when.
type Suspension struct {
	Name   string    `json:"name"`
	Source string    `json:"source"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// String renders the suspension for a refusal: "deactivated in the
// directory (scim) at 2026-12-02T03:00:00Z".
func (s *Suspension) String() string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s) at %s", s.Reason, s.Source, s.At.UTC().Format(time.RFC3339))
}

func suspensionKey(name, source string) []byte {
	return kv.Join([]byte(strings.ToLower(name)), []byte(source))
}

// SuspensionOf returns the earliest-sourced suspension of the person named
// name (names compare case-insensitively, as policy.SamePrincipal does),
// or nil when nothing suspends them.
func SuspensionOf(tx kv.Tx, name string) (*Suspension, error) {
	if strings.TrimSpace(name) == "" {
		return nil, nil
	}
	prefix := kv.Join([]byte(strings.ToLower(name)), nil)
	var found *Suspension
	err := tx.Ascend(bucketSuspensions, prefix, kv.PrefixEnd(prefix), func(_, v []byte) error {
		var s Suspension
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		found = &s
		return kv.ErrStop
	})
	return found, err
}

// SuspendHook is told, in the suspending transaction, that the person
// named name was suspended for why: a domain withdraws what the person
// left pending (their approvals stop counting).
type SuspendHook func(tx *Tx, name, why string) error

// OnSuspend registers a hook run by every Suspend that changes something.
// Call it while wiring, before the bot serves.
func (b *Bot) OnSuspend(h SuspendHook) { b.suspendHooks = append(b.suspendHooks, h) }

// Suspend records that source suspends the person named name for reason,
// audited, and runs the suspend hooks: from the moment tx commits the one
// decision rule refuses the person on every surface and replica
// (policy.Decider.Suspended, read in each deciding transaction), their
// standing grants stop approving (Chat.Current), their console sessions
// are refused, and their counting approvals on pending requests stop
// counting. It reports whether the suspension is new (a second one by the
// same source changes nothing).
func (tx *Tx) Suspend(name, source, reason string) (bool, error) {
	if err := ValidateDirectoryName(name); err != nil {
		return false, Invalid("name", "%v", err)
	}
	key := suspensionKey(name, source)
	if b, err := tx.Get(bucketSuspensions, key); err != nil || b != nil {
		return false, err
	}
	s := Suspension{Name: name, Source: source, Reason: reason, At: tx.now().UTC()}
	v, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	if err := tx.Put(bucketSuspensions, key, v); err != nil {
		return false, err
	}
	if err := tx.Audit("principal_suspended", fmt.Sprintf("%s suspended by %s: %s", name, source, reason)); err != nil {
		return false, err
	}
	why := fmt.Sprintf("%s was suspended (%s)", name, s.String())
	for _, h := range tx.call.bot.suspendHooks {
		if err := h(tx, name, why); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Reinstate lifts source's suspension of the person named name, audited;
// other sources' suspensions stay. Approvals withdrawn by the suspension
// stay withdrawn: the person approves again. It reports whether a
// suspension was lifted.
func (tx *Tx) Reinstate(name, source, reason string) (bool, error) {
	key := suspensionKey(name, source)
	if b, err := tx.Get(bucketSuspensions, key); err != nil || b == nil {
		return false, err
	}
	if err := tx.Delete(bucketSuspensions, key); err != nil {
		return false, err
	}
	return true, tx.Audit("principal_reinstated", fmt.Sprintf("%s reinstated by %s: %s", name, source, reason))
}

// checkSuspended sets c.Caller.Suspended from the store in tx, for a
// person: the one decision rule refuses a suspended decider in the very
// transaction that would record the decision.
func checkSuspended(tx kv.Tx, c *Call) error {
	if c == nil || c.Caller == nil || c.Caller.Kind != "person" {
		return nil
	}
	s, err := SuspensionOf(tx, c.Caller.Name)
	if err != nil {
		return err
	}
	c.Caller.Suspended = s.String()
	return nil
}

// OpenItemsOf returns the records of the open items of kind, in id order,
// at most limit (limit <= 0: all).
func (tx *Tx) OpenItemsOf(kind ItemKind, limit int) ([]ItemRecord, error) {
	var out []ItemRecord
	err := tx.Ascend(bucketOpen, nil, nil, func(k, v []byte) error {
		e, ok := parseOpen(v)
		if !ok || e.Kind != kind {
			return nil
		}
		rec, err := LoadItemRecord(tx, kv.ParseU64(k))
		if err != nil || rec == nil {
			return err
		}
		out = append(out, *rec)
		if limit > 0 && len(out) >= limit {
			return kv.ErrStop
		}
		return nil
	})
	return out, err
}

// ValidateDirectoryName checks the name of a person provisioned from the
// directory (their userName, folded to lower case): a principal name
// (ValidateName) in which '@' and '+' are allowed too, since directories
// name people by email address.
func ValidateDirectoryName(name string) error {
	return ValidateName(strings.NewReplacer("@", "_", "+", "_").Replace(name))
}

// ProvisionPerson stores or updates the principal of a person provisioned
// from the directory: kind person, with role and no scopes, and no API key
// (people provisioned so sign in to the console or decide from chat). id
// "" creates one and returns its id ("prin_…"); otherwise the stored
// principal id is updated (name and role), and must be one the directory
// created.
func ProvisionPerson(tx *Tx, id, name, roleName string) (Principal, error) {
	if err := ValidateDirectoryName(name); err != nil {
		return Principal{}, Invalid("userName", "%v", err)
	}
	role, err := policy.ParseRole(roleName)
	if err != nil {
		return Principal{}, Invalid("role", "%v", err)
	}
	p := Principal{ID: id, Name: name, Role: role, Kind: "person", Source: SourceDirectory, CreatedAt: tx.now().UTC()}
	if id == "" {
		if p.ID, err = newPrincipalID(); err != nil {
			return Principal{}, err
		}
	} else {
		old, err := LoadPrincipal(tx, id)
		if err != nil {
			return Principal{}, err
		}
		if old == nil || old.Source != SourceDirectory {
			return Principal{}, fmt.Errorf("principal %s is not one the directory provisioned", id)
		}
		p.CreatedAt, p.Revoked = old.CreatedAt, old.Revoked
	}
	return p, SavePrincipal(tx, p)
}

// SourceDirectory marks a principal provisioned from the organisation's
// directory (SCIM) in Principal.Source.
const SourceDirectory = "scim"

// DirectoryPrincipal returns the unrevoked stored principal the directory
// provisioned under name (compared case-insensitively), or nil: how the
// console's OIDC sign-in finds a person config.yaml does not list.
func DirectoryPrincipal(tx kv.Tx, name string) (*Principal, error) {
	ps, err := ListPrincipals(tx)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if ps[i].Source == SourceDirectory && !ps[i].Revoked && strings.EqualFold(ps[i].Name, name) {
			return &ps[i], nil
		}
	}
	return nil, nil
}

// DirectoryGroup is a group of people as the directory names it, with its
// members' principal names: an approver group (approvers: {groups: […]})
// a policy reads from the store beside config.yaml's groups:.
type DirectoryGroup struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// PutDirectoryGroup stores group g (replacing one of the same name, case
// folded); Members are sorted and deduplicated. An empty name is refused.
func PutDirectoryGroup(tx kv.Tx, g DirectoryGroup) error {
	if strings.TrimSpace(g.Name) == "" {
		return Invalid("displayName", "a group needs a name")
	}
	g.Members = slices.Compact(slices.Sorted(slices.Values(g.Members)))
	v, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return tx.Put(bucketDirGroups, []byte(strings.ToLower(g.Name)), v)
}

// DeleteDirectoryGroup removes the group named name.
func DeleteDirectoryGroup(tx kv.Tx, name string) error {
	return tx.Delete(bucketDirGroups, []byte(strings.ToLower(name)))
}

// DirectoryGroupMembers returns the principal names of the members of the
// directory's group named name (case-insensitive), and whether there is
// such a group: the store-backed source of approver groups.
func DirectoryGroupMembers(tx kv.Tx, name string) ([]string, bool, error) {
	v, err := tx.Get(bucketDirGroups, []byte(strings.ToLower(name)))
	if err != nil || v == nil {
		return nil, false, err
	}
	var g DirectoryGroup
	if err := json.Unmarshal(v, &g); err != nil {
		return nil, false, err
	}
	return g.Members, true, nil
}

// DirectoryGroups lists the directory's groups in name order.
func DirectoryGroups(tx kv.Tx) ([]DirectoryGroup, error) {
	var out []DirectoryGroup
	err := tx.Ascend(bucketDirGroups, nil, nil, func(_, v []byte) error {
		var g DirectoryGroup
		if err := json.Unmarshal(v, &g); err != nil {
			return err
		}
		out = append(out, g)
		return nil
	})
	return out, err
}

// Call is the call tx runs for: its caller and clock (a suspend hook
// records who suspended, and when).
func (tx *Tx) Call() *Call { return tx.call }
