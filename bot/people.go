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
	bucketDirGroups     = "people_groups"        // lower(group name) -> DirectoryGroup JSON
	bucketDirGroupNames = "people_group_names"   // lower(group name) -> group name
	bucketDirMembers    = "people_group_members" // lower(member) 0x00 lower(group name) -> group name
)

// memberKey is the key of member's place in group in bucketDirMembers;
// memberRange the keys of every group of member (a principal name holds
// no 0x00).
func memberKey(member, group string) []byte {
	return []byte(strings.ToLower(member) + "\x00" + strings.ToLower(group))
}

func memberRange(member string) (from, to []byte) {
	m := strings.ToLower(member)
	return []byte(m + "\x00"), []byte(m + "\x01")
}

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
// The members it no longer lists lose the group at once: in the same
// transaction, their approvals that count for approvers naming the group
// and that no longer include them stop counting (recheckMembers).
func PutDirectoryGroup(tx *Tx, g DirectoryGroup) error {
	if strings.TrimSpace(g.Name) == "" {
		return Invalid("displayName", "a group needs a name")
	}
	old, _, err := DirectoryGroupMembers(tx, g.Name)
	if err != nil {
		return err
	}
	g.Members = slices.Compact(slices.Sorted(slices.Values(g.Members)))
	v, err := json.Marshal(g)
	if err != nil {
		return err
	}
	key := []byte(strings.ToLower(g.Name))
	if err := tx.Put(bucketDirGroups, key, v); err != nil {
		return err
	}
	if err := tx.Put(bucketDirGroupNames, key, []byte(g.Name)); err != nil {
		return err
	}
	var gone []string
	for _, m := range old {
		if !slices.ContainsFunc(g.Members, func(n string) bool { return strings.EqualFold(n, m) }) {
			gone = append(gone, m)
			if err := tx.Delete(bucketDirMembers, memberKey(m, g.Name)); err != nil {
				return err
			}
		}
	}
	for _, m := range g.Members {
		if err := tx.Put(bucketDirMembers, memberKey(m, g.Name), []byte(g.Name)); err != nil {
			return err
		}
	}
	return tx.recheckMembers(g.Name, gone)
}

// DeleteDirectoryGroup removes the group named name: every member loses
// it at once (recheckMembers), as PutDirectoryGroup.
func DeleteDirectoryGroup(tx *Tx, name string) error {
	old, ok, err := DirectoryGroupMembers(tx, name)
	if err != nil || !ok {
		return err
	}
	key := []byte(strings.ToLower(name))
	if err := tx.Delete(bucketDirGroups, key); err != nil {
		return err
	}
	if err := tx.Delete(bucketDirGroupNames, key); err != nil {
		return err
	}
	for _, m := range old {
		if err := tx.Delete(bucketDirMembers, memberKey(m, name)); err != nil {
			return err
		}
	}
	return tx.recheckMembers(name, old)
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

// Call is the call tx runs for: its caller and clock (a suspend hook
// records who suspended, and when).
func (tx *Tx) Call() *Call { return tx.call }

// DirectoryGroupsOf returns the names of the directory's groups that list
// the person named name (case-insensitive), by name (case folded), leaving out
// every group configured reports config.yaml declares: a group config.yaml
// declares is config.yaml's alone (it is authoritative), so a directory
// group of the same name adds nobody to it.
func DirectoryGroupsOf(tx kv.Tx, name string, configured func(group string) bool) ([]string, error) {
	if strings.TrimSpace(name) == "" {
		return nil, nil
	}
	var out []string
	from, to := memberRange(name)
	err := tx.Ascend(bucketDirMembers, from, to, func(_, v []byte) error {
		if g := string(v); configured == nil || !configured(g) {
			out = append(out, g)
		}
		return nil
	})
	return out, err
}

// provisionedGroups lists every group the directory provisions, by name,
// leaving out the groups configured reports config.yaml declares.
func provisionedGroups(tx kv.Tx, configured func(group string) bool) ([]string, error) {
	var out []string
	err := tx.Ascend(bucketDirGroupNames, nil, nil, func(_, v []byte) error {
		if g := string(v); configured == nil || !configured(g) {
			out = append(out, g)
		}
		return nil
	})
	return out, err
}

// configuredGroup reports whether config.yaml declares group, under
// groups: or oncall: (case-insensitively): such a group is config.yaml's
// alone, and the directory adds nobody to it.
func (b *Bot) configuredGroup(group string) bool {
	if b.groups.Has(group) {
		return true
	}
	for name := range b.onCall {
		if strings.EqualFold(name, group) {
			return true
		}
	}
	return false
}

// withDirectory returns a copy of c with the directory's word on its
// groups, read in tx: the directory's groups that list it now
// (config.yaml's declared groups left out), and, among the groups its
// identity provider asserted at sign-in (the OIDC groups claim in
// c.Groups), those the directory provisions, which the claim no longer
// decides: the directory's membership is read now, the claim is as old as
// the sign-in, so a person the directory removed from a group is out of
// it at once even in a console session that began before. Every deciding
// transaction calls it (Bot.Update), so every replica reads the store's
// membership, never a process's memory. A nil c is returned as is.
func withDirectory(tx kv.Tx, b *Bot, c *Caller) (*Caller, error) {
	if c == nil {
		return nil, nil
	}
	of, err := DirectoryGroupsOf(tx, c.Name, b.configuredGroup)
	if err != nil {
		return nil, err
	}
	var provisioned, drop []string
	if len(c.Groups) > 0 { // only a sign-in's claim can name a group the directory decides
		if provisioned, err = provisionedGroups(tx, b.configuredGroup); err != nil {
			return nil, err
		}
	}
	for _, g := range c.Groups {
		if slices.ContainsFunc(provisioned, func(p string) bool { return strings.EqualFold(p, g) }) {
			drop = append(drop, g)
		}
	}
	cc := *c // the caller may be shared (a cached key's)
	cc.dirOf, cc.dirDrop, cc.dirRead = of, drop, true
	return &cc, nil
}

// groupsNow are the approver groups c belongs to at the decision: its
// Groups (the configured groups and on-call turns, and the provider's
// claim) without the claimed groups the directory provisions, and the
// directory's groups that list it (withDirectory).
func (c *Caller) groupsNow() []string {
	if !c.dirRead {
		return c.Groups
	}
	var own []string
	for _, g := range c.Groups {
		if !slices.ContainsFunc(c.dirDrop, func(d string) bool { return strings.EqualFold(d, g) }) {
			own = append(own, g)
		}
	}
	return policy.MergeGroups(own, c.dirOf)
}

// directoryGroups reads the directory's groups of the call's caller in
// tx into the call (withDirectory), for a person: the groups an
// approval is checked against are the store's, in the deciding
// transaction. An agent or a service never approves, so it reads none.
func (tx *Tx) directoryGroups() error {
	c := tx.call
	if c == nil || c.Caller == nil || c.Caller.Kind != "person" || strings.TrimSpace(c.Caller.Name) == "" {
		return nil
	}
	cc, err := withDirectory(tx.Tx, c.bot, c.Caller)
	if err != nil {
		return err
	}
	c.Caller = cc
	return nil
}

// VoteRechecker is implemented by the item sources whose items count the
// approvals of named approvers: RecheckVotes makes the approvals on the
// open item rec that the person named name cast in their own right, or
// that were cast for them under a delegation, stop counting (saying why)
// where they count for approvers that name group (a stage's, or the
// item's) and that no longer include the person (includes: the one
// rule's approvers check, with the person as they stand now). It reports
// whether the item changed, and a note as VoteVoider.VoidVotes does.
type VoteRechecker interface {
	RecheckVotes(tx kv.Tx, rec ItemRecord, name, group string, includes func(policy.Approvers) bool, why string) (changed bool, note string, err error)
}

// recheckMembers runs when the directory's group named group no longer
// lists the people named names (removed from it, or the group deleted or
// renamed): each one's approvals that counted for approvers naming the
// group, and that no longer include them as they stand now, stop counting
// on every open item, as a suspension's do (VoteRechecker); the cards of
// the items that changed are updated, and it is audited. A group
// config.yaml declares is config.yaml's alone: the directory's changes to
// it change nobody's approvals.
func (tx *Tx) recheckMembers(group string, names []string) error {
	if len(names) == 0 || tx.call == nil || tx.call.bot == nil || tx.call.bot.configuredGroup(group) {
		return nil
	}
	_, err := tx.voidLeavers(group, names, "the directory removed them from the group", "the directory's group")
	return err
}

// voidLeavers makes the approvals of each person named in names that
// counted for approvers naming group, and that no longer include them as
// they stand now (their configured groups, on-call turns, directory
// groups and suspension), stop counting on every open item
// (VoteRechecker); the cards of the items that changed are updated, and
// each person's is audited as group_votes_void. how says why they left
// ("the directory removed them from the group"), whose whose group it
// was ("the directory's group"). It returns the items that changed.
func (tx *Tx) voidLeavers(group string, names []string, how, whose string) ([]uint64, error) {
	b := tx.call.bot
	ps := &people{b: b, tx: tx.Tx}
	var all []uint64
	for _, name := range names {
		p, err := ps.person(name)
		if err != nil {
			return nil, err
		}

		includes := func(a policy.Approvers) bool { return p != nil && a.Includes(p.Decider()) }
		why := fmt.Sprintf("no longer an approver: %s %s", how, OneLine(group, 100))
		changed, err := tx.reviseOpen(func(rec ItemRecord) (bool, string, error) {
			vr, ok := b.kinds[rec.Kind].(VoteRechecker)
			if !ok {
				return false, "", nil
			}
			return vr.RecheckVotes(tx.Tx, rec, name, group, includes, why)
		})
		if err != nil {
			return nil, err
		}
		if len(changed) > 0 {
			if err := tx.Audit("group_votes_void", fmt.Sprintf("%q left %s %s: their approvals no longer count on #%s", name, whose, OneLine(group, 100), joinIDs(changed))); err != nil {
				return nil, err
			}
			all = append(all, changed...)
		}
	}
	return all, nil
}

// EmptyDirectoryGroups lists the groups approvers a name that are the
// directory's (config.yaml declares them under neither groups: nor
// oncall:) and that list nobody now, read in tx: a card says so, since
// nobody may approve for them until the directory adds someone (or a
// console sign-in's groups claim names a group the directory has not
// provisioned at all).
func (b *Bot) EmptyDirectoryGroups(tx kv.Tx, a policy.Approvers) ([]string, error) {
	var out []string
	for _, g := range a.Groups {
		if strings.TrimSpace(g) == "" || b.configuredGroup(g) {
			continue
		}
		members, _, err := DirectoryGroupMembers(tx, g)
		if err != nil {
			return nil, err
		}
		if len(members) == 0 {
			out = append(out, g)
		}
	}
	return out, nil
}
