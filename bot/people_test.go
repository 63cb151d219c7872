package bot_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/kv"
)

// TestDirectoryGroups: the directory's groups are stored with their
// members' names (sorted, deduplicated), found by name and by member
// whatever the case, and a group config.yaml declares is left out of a
// member's groups; an unnamed group is refused.
func TestDirectoryGroups(t *testing.T) {
	b := testbot.New(t, bot.Options{})
	ctx := context.Background()
	err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *bot.Tx) error {
		if err := bot.PutDirectoryGroup(tx, bot.DirectoryGroup{Name: "Pharmacists", Members: []string{"ph.lee@hospital.example", "dr_smith", "ph.lee@hospital.example"}}); err != nil {
			return err
		}
		if err := bot.PutDirectoryGroup(tx, bot.DirectoryGroup{Name: "oncall", Members: []string{"DR_SMITH"}}); err != nil {
			return err
		}
		if err := bot.PutDirectoryGroup(tx, bot.DirectoryGroup{Name: " "}); err == nil || !strings.Contains(err.Error(), "a group needs a name") {
			t.Errorf("an unnamed group: %v, want an error saying %q", err, "a group needs a name")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.View(ctx, func(tx kv.Tx) error {
		members, ok, err := bot.DirectoryGroupMembers(tx, "PHARMACISTS")
		if err != nil || !ok || !slices.Equal(members, []string{"dr_smith", "ph.lee@hospital.example"}) {
			t.Errorf("members of pharmacists: %v %v %v; want [dr_smith ph.lee@hospital.example]", members, ok, err)
		}
		if _, ok, _ := bot.DirectoryGroupMembers(tx, "nurses"); ok {
			t.Error("a group nobody provisioned exists")
		}
		groups, err := bot.DirectoryGroupsOf(tx, "Dr_Smith", nil)
		if err != nil || !slices.Equal(groups, []string{"oncall", "Pharmacists"}) {
			t.Errorf("dr_smith's groups: %v %v; want [oncall Pharmacists]", groups, err)
		}
		groups, _ = bot.DirectoryGroupsOf(tx, "dr_smith", func(g string) bool { return strings.EqualFold(g, "pharmacists") })
		if !slices.Equal(groups, []string{"oncall"}) {
			t.Errorf("dr_smith's groups beside a configured pharmacists: %v, want [oncall]", groups)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
