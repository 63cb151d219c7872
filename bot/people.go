package bot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// This file is what the core keeps about people from the organisation's
// directory beyond config.yaml: people it provisioned (stored principals
// of kind person), its groups, and the hooks a suspension runs
// (suspensions.go holds the suspensions themselves). All of it lives in
// the store, so every replica reads the same state.

// People buckets.
const (
	bucketDirGroups = "people_groups" // lower(group name) -> DirectoryGroup JSON
)

// SuspendHook is told, in the suspending transaction (Tx.Suspend), that
// the person named name was suspended for why: a domain ends what the
// person left standing (actiontools revokes their grants).
type SuspendHook func(tx *Tx, name, why string) error

// OnSuspend registers a hook run by every Suspend that records a new
// suspension. Call it while wiring, before the bot serves.
func (b *Bot) OnSuspend(h SuspendHook) { b.suspendHooks = append(b.suspendHooks, h) }

// runSuspendHooks runs the suspend hooks for a new suspension of name.
func (tx *Tx) runSuspendHooks(name, why string) error {
	for _, h := range tx.call.bot.suspendHooks {
		if err := h(tx, name, why); err != nil {
			return err
		}
	}
	return nil
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

// DirectoryGroups lists the directory's groups by name (case folded).
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

// DirectoryGroupsOf returns the names of the directory's groups that list
// the person named name (case-insensitive), by name (case folded), leaving out
// every group configured reports config.yaml declares: a group config.yaml
// declares is config.yaml's alone (it is authoritative), so a directory
// group of the same name adds nobody to it.
func DirectoryGroupsOf(tx kv.Tx, name string, configured func(group string) bool) ([]string, error) {
	gs, err := DirectoryGroups(tx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range gs {
		if configured != nil && configured(g.Name) {
			continue
		}
		if slices.ContainsFunc(g.Members, func(m string) bool { return strings.EqualFold(m, name) }) {
			out = append(out, g.Name)
		}
	}
	return out, nil
}
