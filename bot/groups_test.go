package bot_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/policy"
)

// TestGroupResolution: the approver groups a person belongs to in a
// deciding transaction. config.yaml's groups: list their members (and a
// declared group is config.yaml's alone: the directory's group of the
// same name adds nobody, nor does one named like an on-call rotation);
// the directory's groups list theirs, read from the store in the
// transaction, so a change counts from the next decision; a sign-in's
// groups claim names groups too, except those the directory provisions
// (the directory's membership is read now, the claim is as old as the
// sign-in). An agent's call reads no directory groups.
func TestGroupResolution(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	b := testbot.New(t, bot.Options{
		Now:    func() time.Time { return now },
		Groups: policy.Groups{"nurses": {"ph_kim"}, "on_call_doctors": {}},
		OnCall: map[string]policy.Rotation{"ops": {People: []string{"alice"}, Start: now.Add(-time.Hour), Length: 24 * time.Hour}},
	})
	var got []string
	if err := b.Register(bot.Tool{Name: "groups_now", Capability: policy.CapApprove, Args: struct{}{},
		Handler: func(ctx context.Context, c *bot.Call, _ any) (bot.Result, error) {
			return bot.Result{}, c.Update(ctx, func(tx *bot.Tx) error {
				got = tx.Call().Caller.Decider().Groups
				return nil
			})
		}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(groups ...bot.DirectoryGroup) {
		t.Helper()
		if err := b.Update(ctx, b.SystemCall(now), func(tx *bot.Tx) error {
			for _, g := range groups {
				if err := bot.PutDirectoryGroup(tx, g); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(bot.DirectoryGroup{Name: "Pharmacists", Members: []string{"ph_lee", "dr_smith"}},
		bot.DirectoryGroup{Name: "nurses", Members: []string{"dr_smith"}}, // config.yaml declares nurses
		bot.DirectoryGroup{Name: "OPS", Members: []string{"bob"}},         // an on-call rotation
		bot.DirectoryGroup{Name: "icu"})
	person := func(name string, claim ...string) *bot.Caller {
		return &bot.Caller{Principal: bot.Principal{ID: "chat:" + name, Name: name, Role: policy.RoleMember, Kind: "person"}, Surface: "slack", Groups: claim}
	}
	for _, tc := range []struct {
		name   string
		caller *bot.Caller
		want   []string
	}{
		{"a directory group's member", person("ph_lee"), []string{"Pharmacists"}},
		{"the name's case does not matter", person("PH_LEE"), []string{"Pharmacists"}},
		{"a declared group is config.yaml's alone", person("dr_smith"), []string{"Pharmacists"}},
		{"config.yaml's group", person("ph_kim"), []string{"nurses"}},
		{"on call", person("alice"), []string{"ops"}},
		{"the directory adds nobody to a rotation", person("bob"), nil},
		{"a claim of a group config.yaml declares", person("dr_smith", "on_call_doctors"), []string{"Pharmacists", "on_call_doctors"}},
		{"a claim of an on-call rotation puts nobody on call", person("bob", "ops", "OPS"), nil},
		{"a claim of a group nobody provisions", person("bob", "radiology"), []string{"radiology"}},
		{"a claim of a group the directory provisions", person("bob", "pharmacists"), nil},
		{"a claim of an empty directory group", person("bob", "ICU"), nil},
		{"an agent reads no directory groups", &bot.Caller{Principal: bot.Principal{ID: "prin_a", Name: "ph_lee", Role: policy.RoleMember, Kind: "agent"}}, nil},
	} {
		got = []string{"not called"}
		_, err := b.Call(ctx, tc.caller, "groups_now", []byte(`{}`))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %s's groups %q (%v), want %q", tc.name, tc.caller.Name, got, err, tc.want)
		}
	}

	// The directory removes ph_lee: from the next decision on, they are
	// in no group; dr_smith is still in pharmacists.
	put(bot.DirectoryGroup{Name: "pharmacists", Members: []string{"dr_smith"}})
	for name, want := range map[string][]string{"ph_lee": nil, "dr_smith": {"pharmacists"}} {
		if _, err := b.Call(ctx, person(name), "groups_now", []byte(`{}`)); err != nil || !slices.Equal(got, want) {
			t.Errorf("after the removal, %s's groups %q (%v), want %q", name, got, err, want)
		}
	}
}

// BenchmarkDirectoryGroupsRead: what reading the directory's groups costs
// a person's deciding call, with no directory groups and with 100 groups
// of 100 members each (compare the two in one run).
func BenchmarkDirectoryGroupsRead(bm *testing.B) {
	for _, n := range []int{0, 100} {
		bm.Run(fmt.Sprintf("groups=%d", n), func(bm *testing.B) {
			b := testbot.New(bm, bot.Options{})
			if err := b.Register(bot.Tool{Name: "groups_now", Capability: policy.CapApprove, Args: struct{}{},
				Handler: func(ctx context.Context, c *bot.Call, _ any) (bot.Result, error) {
					return bot.Result{}, c.Update(ctx, func(tx *bot.Tx) error { return nil })
				}}); err != nil {
				bm.Fatal(err)
			}
			ctx := context.Background()
			if err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *bot.Tx) error {
				for i := range n {
					g := bot.DirectoryGroup{Name: fmt.Sprintf("group_%d", i)}
					for j := range 100 {
						g.Members = append(g.Members, fmt.Sprintf("person_%d_%d@hospital.example", i, j))
					}
					if err := bot.PutDirectoryGroup(tx, g); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				bm.Fatal(err)
			}
			caller := &bot.Caller{Principal: bot.Principal{ID: "chat:person_5_5@hospital.example", Name: "person_5_5@hospital.example", Role: policy.RoleMember, Kind: "person"}, Surface: "slack"}
			bm.ResetTimer()
			for range bm.N {
				if _, err := b.Call(ctx, caller, "groups_now", []byte(`{}`)); err != nil {
					bm.Fatal(err)
				}
			}
		})
	}
}
