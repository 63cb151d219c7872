package bot

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// recheckSource is a testSource whose items count named approvers: it
// records each RecheckVotes, with whether the person as they stand now is
// included by approvers naming each group of ask.
type recheckSource struct {
	testSource
	ask   []string
	calls *[]string
}

func (s recheckSource) RecheckVotes(_ kv.Tx, rec ItemRecord, name, group string, includes func(policy.Approvers) bool, why string) (bool, string, error) {
	line := rec.Key + " " + name + " left " + group + ":"
	for _, g := range s.ask {
		if includes(policy.Approvers{Groups: []string{g}}) {
			line += " still " + g
		}
	}
	*s.calls = append(*s.calls, line+" ("+why+")")
	return true, "", nil
}

// TestRecheckConfiguredGroups: the first start records the configured
// groups and changes nothing; a start whose groups list someone no more
// rechecks that person's votes on every open item, with the person as
// they stand now (a directory group they still hold counts), audits it
// and records the new groups; a start with the same groups, or with a
// member added, rechecks nobody.
func TestRecheckConfiguredGroups(t *testing.T) {
	ctx := context.Background()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	var calls []string
	start := func(groups policy.Groups) (*Bot, []uint64) {
		t.Helper()
		b, err := New(Options{Store: db, SigningKey: key, Groups: groups, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		b.Items().RegisterKind(KindAction, recheckSource{testSource{status: map[string]string{"r1": "pending"}}, []string{"pharmacists", "seniors"}, &calls})
		ids, err := b.RecheckConfiguredGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b, ids
	}

	b, ids := start(policy.Groups{"pharmacists": {"ph_kim", "ph_lee"}})
	if len(ids) != 0 || len(calls) != 0 {
		t.Fatalf("the first start: items %v, rechecks %v; want none", ids, calls)
	}
	var item uint64
	if err := b.Update(ctx, b.SystemCall(now), func(tx *Tx) error {
		if _, err := CreateKey(tx, now, NewKey{Name: "ph_kim", Role: policy.RoleMember}); err != nil {
			return err
		}
		if err := PutDirectoryGroup(tx, DirectoryGroup{Name: "seniors", Members: []string{"ph_kim"}}); err != nil {
			return err
		}
		item, err = tx.NewItem(KindAction, "r1", Space{UserID: "u"}, "", time.Time{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	_, ids = start(policy.Groups{"Pharmacists": {"PH_LEE"}})
	want := "r1 ph_kim left pharmacists: still seniors (no longer an approver: config.yaml no longer lists them in the group pharmacists)"
	if len(ids) != 1 || ids[0] != item || len(calls) != 1 || calls[0] != want {
		t.Fatalf("ph_kim taken out: items %v, rechecks %q; want item %d and %q", ids, calls, item, want)
	}
	var entries []approvals.Entry
	if err := db.View(ctx, func(tx kv.Tx) error {
		entries, err = approvals.List(tx, approvals.Filter{Limit: 1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Action != "group_votes_void" || !strings.Contains(entries[0].Detail, `"ph_kim" left config.yaml's group pharmacists: their approvals no longer count on #`) {
		t.Fatalf("the newest audit entry: %+v, want group_votes_void naming ph_kim", entries)
	}

	start(policy.Groups{"Pharmacists": {"PH_LEE"}})
	start(policy.Groups{"pharmacists": {"ph_lee", "ph_roe"}})
	if len(calls) != 1 {
		t.Fatalf("starts that took nobody out rechecked %q, want no recheck after the first", calls[1:])
	}
}
