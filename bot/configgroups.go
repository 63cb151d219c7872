package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/policy"
)

// bucketConfigGroups keeps the configured groups (Options.Groups) as the
// last start read them, under keyConfigGroups.
const (
	bucketConfigGroups = "config_groups"
	keyConfigGroups    = "groups"
)

// RecheckConfiguredGroups compares the configured groups (groups: in
// config.yaml, Options.Groups) with those the store recorded at the last
// start. Each person a group no longer lists (taken out of it, or the
// group removed) has the approvals that counted for approvers naming the
// group, and that no longer include them as they stand now, stop counting
// on every open item, as when the directory removes someone from a
// group: an approval keeps counting only while its voter still has its
// place. The items' cards are updated, each person's is audited
// (group_votes_void), and the configured groups are recorded for the next
// start. A store that recorded none (its first start, or one from before
// this check) records them and changes nothing. Call it once at start,
// after every item source is registered; it returns the items changed.
func (b *Bot) RecheckConfiguredGroups(ctx context.Context) ([]uint64, error) {
	now, err := json.Marshal(b.groups)
	if err != nil {
		return nil, err
	}
	var changed []uint64
	err = b.Update(ctx, b.SystemCall(b.Now()), func(tx *Tx) error {
		raw, err := tx.Get(bucketConfigGroups, []byte(keyConfigGroups))
		if err != nil {
			return err
		}
		if raw != nil {
			var last policy.Groups
			if err := json.Unmarshal(raw, &last); err != nil {
				return fmt.Errorf("the configured groups recorded at the last start do not read (%v); remove the key %q of bucket %q to record them anew", err, keyConfigGroups, bucketConfigGroups)
			}
			for _, g := range sortedGroups(last) {
				if gone := leftGroup(last[g], b.groups, g); len(gone) > 0 {
					ids, err := tx.voidLeavers(g, gone, "config.yaml no longer lists them in the group", "config.yaml's group")
					if err != nil {
						return err
					}
					changed = append(changed, ids...)
				}
			}
		}
		if string(raw) == string(now) {
			return nil
		}
		return tx.Put(bucketConfigGroups, []byte(keyConfigGroups), now)
	})
	slices.Sort(changed)
	return slices.Compact(changed), err
}

// sortedGroups are the names of g, sorted (a deterministic audit).
func sortedGroups(g policy.Groups) []string {
	out := make([]string, 0, len(g))
	for name := range g {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// leftGroup lists the members of group as it was (last) that the group
// named group in now no longer lists (all of them when now has no such
// group); names and groups compare case-insensitively.
func leftGroup(last []string, now policy.Groups, group string) []string {
	var members []string
	for name, ms := range now {
		if strings.EqualFold(name, group) {
			members = ms
		}
	}
	var gone []string
	for _, m := range last {
		if !slices.ContainsFunc(members, func(n string) bool { return strings.EqualFold(n, m) }) {
			gone = append(gone, m)
		}
	}
	return gone
}
