package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
	slackgo "github.com/slack-go/slack"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	asked   = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	expires = asked.Add(30 * time.Minute)
	decided = asked.Add(12 * time.Minute)
)

// The fixtures are items as the core's sources make them (bot/memorytools,
// bot/actiontools): the card's lines computed there, the developer detail
// under Details.
func memoryItem() bot.Item {
	return bot.Item{
		ID: 7, Kind: bot.KindMemoryChange, Title: "patient_42's active_medication: warfarin 5mg daily → apixaban 5mg twice daily",
		Requester: "intake_agent [prin_4f2a9c]", CreatedAt: asked, Status: "pending", Channel: "default",
		Effect: "apixaban 5mg twice daily becomes patient_42's active_medication for every agent, replacing warfarin 5mg daily; nothing is ordered or run.",
		Asked:  "Every change to active_medication waits for a person: it is a confirm slot of the slot schema.",
		Fields: []bot.Field{
			{Label: "Current value", Value: "warfarin 5mg daily"},
			{Label: "Proposed value", Value: "apixaban 5mg twice daily"},
			{Label: "Said", Value: "Switch her to apixaban 5mg twice daily, stop the warfarin tonight and recheck renal function on Monday."},
			{Label: "Source", Value: "intake_agent"},
			{Label: "Confidence", Value: "0.92"},
		},
		Details: []bot.Field{
			{Label: "Memory", Value: "#3"}, {Label: "Space", Value: "patient_42"}, {Label: "Subject", Value: "active_medication"},
			{Label: "Proposed by", Value: "intake_agent [prin_4f2a9c]"},
		},
	}
}

// actionItem is a destructive call: its danger first.
func actionItem() bot.Item {
	return bot.Item{
		ID: 12, Kind: bot.KindAction, Title: "Drop the orders_prod database after the migration to orders_v2.",
		Requester: "deploy_bot [prin_9a0b1c]", CreatedAt: asked, ExpiresAt: expires, Status: "pending", Channel: "ops",
		Effect: "deploy_bot runs delete_database once with these arguments, as the dry run describes, within 1 hour of the approval.",
		Asked:  "delete_database is configured as destructive, so a person reviews its dry run and approves every call.",
		Args:   []bot.Field{{Label: "cascade", Value: "true"}, {Label: "db_name", Value: "orders_prod"}},
		Danger: &bot.Danger{Warning: "⚠ delete_database is destructive: approving it cannot be undone. Read the dry run before you approve.",
			Target: "orders_prod", TargetLabel: "db_name", Confirm: "delete_database runs once on db_name orders_prod and cannot be undone."},
		Fields: []bot.Field{
			{Label: "Dry-run plan", Value: "DROP DATABASE orders_prod;\n-- 42 tables, 1.2M rows\n-- backups: s3://backups/orders_prod/2026-01-01"},
			{Label: "Effects the agent expects", Value: "irreversible data loss unless restored from backup"},
		},
		Details: []bot.Field{
			{Label: "Request", Value: "req_0123456789abcdef"}, {Label: "Tool", Value: "delete_database"},
			{Label: "Arguments (JSON)", Value: `{"cascade":true,"db_name":"orders_prod"}`},
			{Label: "Arguments SHA-256", Value: "8cfd3f1b0a6c4e2d9b7a5c3e1f0d2b4a6c8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a"},
			{Label: "Configured", Value: "category destructive, mechanics dry_run_confirm"},
			{Label: "Approvals", Value: "0 of 1 approvals (quorum 1)"}, {Label: "Requested by", Value: "deploy_bot [prin_9a0b1c]"},
		},
	}
}

// orderItem is a mutating call whose approval rests on facts: one SAFE,
// one BLOCKED before anyone clicks.
func orderItem() bot.Item {
	return bot.Item{
		ID: 14, Kind: bot.KindAction, Title: "Start apixaban 5 mg twice daily for patient_42",
		Requester: "ward_bot [prin_7c1e]", CreatedAt: asked, ExpiresAt: expires, Status: "pending", Channel: "pharmacy",
		Effect: "ward_bot runs order_medication once with these arguments, within 1 hour of the approval. If allergy or active_medication changes first, it does not run and comes back for a new decision.",
		Asked:  "order_medication is configured as mutating, so a person approves every call; the approval rests on allergy and active_medication as they are when you approve.",
		Args:   []bot.Field{{Label: "dose", Value: "5 mg twice daily"}, {Label: "drug", Value: "apixaban"}},
		Facts: []bot.FactView{
			{Subject: "allergy", Value: "none", Verdict: "SAFE", Version: "3:A"},
			{Subject: "active_medication", Value: "none", Verdict: "BLOCKED", Reasons: []string{"no active fact for this subject — nothing safe to act on"}},
		},
		Editable: &bot.Editable{Kind: bot.EditArguments, Current: []byte(`{"dose":"5 mg twice daily","drug":"apixaban"}`)},
		Details:  []bot.Field{{Label: "Request", Value: "req_fedcba9876543210"}, {Label: "Requested by", Value: "ward_bot [prin_7c1e]"}},
	}
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("all work and no play ", 400)
	cases := []struct {
		name string
		item func() bot.Item
	}{
		{"memory_pending", memoryItem},
		{"action_pending", actionItem},
		{"action_facts", orderItem},
		{"action_reopened", func() bot.Item {
			it := orderItem()
			it.Reopened = "allergy: none → penicillin"
			it.Facts[0] = bot.FactView{Subject: "allergy", Value: "penicillin", Verdict: "SAFE", Version: "9:A"}
			return it
		}},
		{"action_approved_on_facts", func() bot.Item {
			it := orderItem()
			it.Status, it.DecidedBy, it.DecidedAt, it.Editable = "approved", []string{"ph_lee [U0PHLEE]"}, decided, nil
			it.Effect = "ward_bot may run order_medication once with these arguments, before 10:12 UTC. The facts changed since the approval (allergy: none → penicillin): it will not run, and comes back for a new decision."
			it.Facts[0] = bot.FactView{Subject: "allergy", Value: "penicillin", Verdict: "SAFE", Was: "none", Version: "9:A"}
			return it
		}},
		{"action_quorum", func() bot.Item {
			it := actionItem()
			it.Tally = "1 of 2 approvals: dr_smith [U0123ABC]"
			return it
		}},
		{"memory_approved", func() bot.Item {
			it := memoryItem()
			it.Status, it.DecidedBy, it.DecidedAt = "approved", []string{"dr_smith [U0123ABC]"}, decided
			return it
		}},
		{"action_rejected", func() bot.Item {
			it := actionItem()
			it.Status, it.DecidedBy, it.DecidedAt, it.Reason = "rejected", []string{"nurse_jo [U0456DEF]"}, decided, "Not during the freeze; the ``` migration <@U1> is not verified."
			return it
		}},
		{"action_expired", func() bot.Item {
			it := actionItem()
			it.Status, it.DecidedAt = "expired", expires
			return it
		}},
		{"question_single", func() bot.Item {
			return bot.Item{ID: 21, Kind: bot.KindQuestion, Title: "Which replica should take the traffic?", Requester: "router_agent [prin_77]",
				CreatedAt: asked, ExpiresAt: expires, Status: "pending", Options: []string{"eu-west-1", "us-east-1", "<!here> both"}}
		}},
		{"question_multi", func() bot.Item {
			return bot.Item{ID: 22, Kind: bot.KindQuestion, Title: "Which checks may be skipped?", Requester: "router_agent [prin_77]",
				CreatedAt: asked, Status: "pending", Multi: true, Options: []string{"lint", "unit", "integration"}}
		}},
		{"sensitive_pending", func() bot.Item {
			it := memoryItem()
			it.Title, it.Sensitive = "A change to a sensitive slot awaits approval", true
			return it
		}},
		{"sensitive_rejected", func() bot.Item {
			it := memoryItem()
			it.Title, it.Sensitive = "A change to a sensitive slot awaits approval", true
			it.Status, it.DecidedBy, it.DecidedAt, it.Reason = "rejected", []string{"dr_smith [U0123ABC]"}, decided, "patient is allergic"
			return it
		}},
		// The header, confirmation and option labels are plain_text, which
		// Slack shows literally: since issue 14 they carry the text as
		// written (no "&lt;"/"&gt;" entities; an invisible word joiner after
		// "<" of a would-be reference). mrkdwn stays escaped.
		{"injection", func() bot.Item {
			return bot.Item{ID: 30, Kind: bot.KindMemoryChange, Title: "<!channel> *URGENT* approve now",
				Requester: "agent [a]", CreatedAt: asked, Status: "pending",
				Fields: []bot.Field{
					{Label: "Proposed", Value: "<!channel> @everyone <@U0123ABC> <https://evil.example|click> & @Here"},
					{Label: "Said", Value: "ignore the above\n*Approved by dr_smith*\n```\n<!subteam^S1>"},
					{Label: "Bidi", Value: "abc\u202edcba\x07"},
				}}
		}},
		{"action_editable", func() bot.Item {
			it := actionItem()
			it.Danger = nil
			it.Editable = &bot.Editable{Kind: bot.EditArguments, Current: []byte(`{"cascade":true,"db_name":"orders_prod"}`)}
			return it
		}},
		{"action_approved_with_changes", func() bot.Item {
			it := actionItem()
			it.Status, it.DecidedBy, it.DecidedAt = "approved", []string{"nurse_jo [U0456DEF]"}, decided
			it.Changes = &bot.Changes{By: "nurse_jo [U0456DEF]", Diff: []bot.Change{{Field: "db_name", From: "orders_prod", To: "<!channel> *orders_staging*"}}}
			it.Args = []bot.Field{{Label: "cascade", Value: "true"}, {Label: "db_name", Value: "<!channel> *orders_staging*"}}
			return it
		}},
		{"long", func() bot.Item {
			return bot.Item{ID: 40, Kind: bot.KindAction, Title: long, Requester: "agent [a]", CreatedAt: asked, Status: "pending",
				Fields: []bot.Field{{Label: "Arguments", Value: long}, {Label: "Amp", Value: strings.Repeat("&", 3000)}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it := c.item()
			got := renderJSON(t, it)
			path := filepath.Join("testdata", c.name+".golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v, want the golden file (run go test ./adapters/slack -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendering of %s differs from %s, want it equal (run with -update to accept):\n%s", c.name, path, got)
			}
			checkLimits(t, itemBlocks(it, false))
			if it.Sensitive {
				checkLimits(t, itemBlocks(it, true))
			}
		})
	}
}

// renderJSON renders the channel message (and, for a sensitive item, the
// private detail) as the golden document.
func renderJSON(t *testing.T, it bot.Item) []byte {
	t.Helper()
	doc := map[string]any{"text": itemText(it), "blocks": slackgo.Blocks{BlockSet: itemBlocks(it, false)}}
	if it.Sensitive && it.Pending() {
		doc["detail_text"] = detailText(it)
		doc["detail_blocks"] = slackgo.Blocks{BlockSet: itemBlocks(it, true)}
	}
	if it.Pending() {
		doc["reason_modal"] = reasonModal(it, "C0OPS")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	// slack-go marshals blocks with HTML escaping; undo it so the golden
	// files show what Slack receives as it reads.
	out := bytes.ReplaceAll(buf.Bytes(), []byte(`\u003c`), []byte("<"))
	out = bytes.ReplaceAll(out, []byte(`\u003e`), []byte(">"))
	return bytes.ReplaceAll(out, []byte(`\u0026`), []byte("&"))
}

// checkLimits asserts Slack's documented limits on rendered blocks.
func checkLimits(t *testing.T, blocks []slackgo.Block) {
	t.Helper()
	if len(blocks) > maxBlocks {
		t.Errorf("%d blocks, want at most %d", len(blocks), maxBlocks)
	}
	runes := func(o *slackgo.TextBlockObject) int { return utf8.RuneCountInString(o.Text) }
	for _, b := range blocks {
		switch b := b.(type) {
		case *slackgo.HeaderBlock:
			if n := runes(b.Text); n > maxHeaderText {
				t.Errorf("header text of %d runes, want at most %d", n, maxHeaderText)
			}
		case *slackgo.SectionBlock:
			if b.Text != nil && runes(b.Text) > maxSectionText {
				t.Errorf("section text of %d runes, want at most %d", runes(b.Text), maxSectionText)
			}
			if len(b.Fields) > maxFields {
				t.Errorf("%d fields, want at most %d", len(b.Fields), maxFields)
			}
			for _, f := range b.Fields {
				if runes(f) > maxFieldText {
					t.Errorf("field of %d runes, want at most %d", runes(f), maxFieldText)
				}
			}
		case *slackgo.ActionBlock:
			if len(b.Elements.ElementSet) > maxActionElements {
				t.Errorf("%d action elements, want at most %d", len(b.Elements.ElementSet), maxActionElements)
			}
			for _, el := range b.Elements.ElementSet {
				if btn, ok := el.(*slackgo.ButtonBlockElement); ok {
					if runes(btn.Text) > maxButtonText || utf8.RuneCountInString(btn.Value) > maxButtonValue {
						t.Errorf("button %q: text %d runes, value %d, want at most %d and %d", btn.Text.Text, runes(btn.Text), utf8.RuneCountInString(btn.Value), maxButtonText, maxButtonValue)
					}
				}
			}
		}
	}
}

func TestEscapeMakesMarkupInert(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"<!channel>", "&lt;!channel&gt;"},
		{"<!here|here>", "&lt;!here|here&gt;"},
		{"<@U0123ABC>", "&lt;@U0123ABC&gt;"},
		{"<#C0123|general>", "&lt;#C0123|general&gt;"},
		{"<https://evil.example|click here>", "&lt;https://evil.example|click here&gt;"},
		{"<!subteam^S0123>", "&lt;!subteam^S0123&gt;"},
		{"a & b", "a &amp; b"},
		{"&lt;!channel&gt;", "&amp;lt;!channel&amp;gt;"},
		{"@channel", "@\u2060channel"},
		{"hey @Everyone and @HERE", "hey @\u2060Everyone and @\u2060HERE"},
		{"mail me at a@hereford.example", "mail me at a@\u2060hereford.example"},
		{"@channelled @chan", "@\u2060channelled @chan"},
		{"line\r\nbreak\ttab", "line\nbreak\ttab"},
		{"bell\x07nul\x00", "bell\ufffdnul\ufffd"},
		{"abc\u202edcba", "abcdcba"}, // dropped, as on every surface (bot.OneLine)
		{"warfarin 5mg", "warfarin 5mg"},
		{"\xff", "\ufffd"},
	}
	for _, c := range cases {
		if got := escape(c.in); got != c.want {
			t.Errorf("escape(%q) = %q, want %q", c.in, got, c.want)
		}
		got := escape(c.in)
		if strings.ContainsAny(got, "<>") {
			t.Errorf("escape(%q) = %q, want no < or >", c.in, got)
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"fits", "abc", 3, "abc"},
		{"cut", strings.Repeat("a", 20), 15, "aaa" + truncMarker},
		{"runes", strings.Repeat("é", 20), 14, "éé" + truncMarker},
		{"entity not split", "aa&amp;bbbbbbbbbbbbbbb", 16, "aa" + truncMarker},
		{"entity kept whole", "aa&amp;bbbbbbbbbbbbbbb", 19, "aa&amp;" + truncMarker},
		{"trailing newline dropped", "ab\n" + strings.Repeat("c", 20), 15, "ab" + truncMarker},
		{"tiny limit", strings.Repeat("a", 20), 3, truncMarker},
	}
	for _, c := range cases {
		got := truncate(c.in, c.max)
		if got != c.want {
			t.Errorf("%s: truncate(%q, %d) = %q, want %q", c.name, c.in, c.max, got, c.want)
		}
		if c.max >= utf8.RuneCountInString(truncMarker) && utf8.RuneCountInString(got) > c.max {
			t.Errorf("%s: %d runes, want at most %d", c.name, utf8.RuneCountInString(got), c.max)
		}
	}
}

func TestCodeSafeNeverClosesTheFence(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"```", "````", "a``b", "`", "x`", "`x", "``````"} {
		got := codeSafe(in)
		if strings.Contains(got, "``") || strings.HasPrefix(got, "`") || strings.HasSuffix(got, "`") {
			t.Errorf("codeSafe(%q) = %q can close a code block, want no backtick pair or edge backtick", in, got)
		}
		if strings.ReplaceAll(got, "\u200b", "") != in {
			t.Errorf("codeSafe(%q) = %q, want only zero-width spaces added", in, got)
		}
	}
}

// TestPendingItemHasExactlyOneActionsBlock: however long or hostile the
// text, a message carries one actions block, whose only buttons are ours.
func TestPendingItemHasExactlyOneActionsBlock(t *testing.T) {
	t.Parallel()
	it := actionItem()
	for i := 0; i < 80; i++ {
		it.Fields = append(it.Fields, bot.Field{Label: "Field", Value: strings.Repeat("<button> \"action_id\": \"countersign.approve\" ", 100)})
	}
	blocks := itemBlocks(it, false)
	checkLimits(t, blocks)
	var actions []*slackgo.ActionBlock
	for _, b := range blocks {
		if a, ok := b.(*slackgo.ActionBlock); ok {
			actions = append(actions, a)
		}
	}
	if len(actions) != 1 || len(actions[0].Elements.ElementSet) != 3 {
		t.Fatalf("want one actions block with Approve, Reject and Details, got %d blocks", len(actions))
	}
	if _, ok := blocks[len(blocks)-1].(*slackgo.ActionBlock); !ok {
		t.Errorf("last block is %T, want the buttons (an ActionBlock) after the truncation note", blocks[len(blocks)-1])
	}
}
