package discord

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The golden files changed once for wording only (issue 10.2): times are
// shown as chat.Stamp renders them on every surface ("2026-03-01 09:07
// UTC", without seconds), and a stale item is "Closed as stale", as in
// Slack and the chat commands.

// golden compares got with testdata/name.golden.json (or rewrites it with
// -update).
func golden(t *testing.T, name string, got any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	// The zero-width space is invisible; show it as an escape.
	out := bytes.ReplaceAll(buf.Bytes(), []byte(zwsp), []byte(`\u200b`))
	buf.Reset()
	buf.Write(out)
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v, want the golden file (run go test ./adapters/discord -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file; review and run with -update if intended.\ngot:\n%s\nwant:\n%s", path, buf.Bytes(), want)
	}
}

var (
	created = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	decided = time.Date(2026, 3, 1, 9, 7, 30, 0, time.UTC)
)

// The fixtures are items as the core's sources make them (bot/memorytools,
// bot/actiontools): the card's lines computed there, the developer detail
// under Details.
func pendingMemory() bot.Item {
	return bot.Item{
		ID: 12, Kind: bot.KindMemoryChange, Status: "pending", CreatedAt: created, ExpiresAt: created.Add(168 * time.Hour),
		Title:     "patient_7's active_medication: warfarin 5mg daily → apixaban 5mg twice daily",
		Space:     bot.Space{UserID: "patient_7"},
		Requester: "intake_agent [prin_4f2a]",
		Effect:    "apixaban 5mg twice daily becomes patient_7's active_medication for every agent, replacing warfarin 5mg daily; nothing is ordered or run.",
		Asked:     "Every change to active_medication waits for a person: it is a confirm slot of the slot schema.",
		Fields: []bot.Field{
			{Label: "Current value", Value: "warfarin 5mg daily"},
			{Label: "Proposed value", Value: "apixaban 5mg twice daily"},
			{Label: "Said", Value: "Switch her to apixaban 5mg twice daily."},
		},
		Details: []bot.Field{{Label: "Memory", Value: "#4"}, {Label: "Space", Value: "patient_7"}, {Label: "Proposed by", Value: "intake_agent [prin_4f2a]"}},
		Channel: "default",
	}
}

// pendingAction is a destructive call: its danger first.
func pendingAction() bot.Item {
	return bot.Item{
		ID: 31, Kind: bot.KindAction, Status: "pending", CreatedAt: created, ExpiresAt: created.Add(30 * time.Minute),
		Title:     "Drop orders_prod: the migration to orders_v2 is done",
		Requester: "ops_agent [prin_9c1d]",
		Effect:    "ops_agent runs delete_database once with these arguments, as the dry run describes, within 1 hour of the approval.",
		Asked:     "delete_database is configured as destructive, so a person reviews its dry run and approves every call.",
		Args:      []bot.Field{{Label: "db_name", Value: "orders_prod"}},
		Danger: &bot.Danger{Warning: "⚠ delete_database is destructive: approving it cannot be undone. Read the dry run before you approve.",
			Target: "orders_prod", TargetLabel: "db_name", Confirm: "delete_database runs once on db_name orders_prod and cannot be undone."},
		Fields: []bot.Field{
			{Label: "Dry-run plan", Value: "DROP DATABASE orders_prod\n41 tables, 1.2M rows"},
		},
		Details: []bot.Field{
			{Label: "Request", Value: "req_0123456789abcdef"}, {Label: "Arguments (JSON)", Value: `{"db_name":"orders_prod"}`},
			{Label: "Configured", Value: "category destructive, mechanics dry_run_confirm"}, {Label: "Requested by", Value: "ops_agent [prin_9c1d]"},
		},
		Channel: "ops",
	}
}

// orderAction is a mutating call whose approval rests on facts.
func orderAction() bot.Item {
	return bot.Item{
		ID: 33, Kind: bot.KindAction, Status: "pending", CreatedAt: created, ExpiresAt: created.Add(30 * time.Minute),
		Title:     "Start apixaban 5 mg twice daily for patient_42",
		Requester: "ward_bot [prin_7c1e]",
		Effect:    "ward_bot runs order_medication once with these arguments, within 1 hour of the approval. If allergy or active_medication changes first, it does not run and comes back for a new decision.",
		Asked:     "order_medication is configured as mutating, so a person approves every call; the approval rests on allergy and active_medication as they are when you approve.",
		Args:      []bot.Field{{Label: "dose", Value: "5 mg twice daily"}, {Label: "drug", Value: "apixaban"}},
		Facts: []bot.FactView{
			{Subject: "allergy", Value: "none", Verdict: "SAFE", Version: "3:A"},
			{Subject: "active_medication", Value: "none", Verdict: "BLOCKED", Reasons: []string{"no active fact for this subject — nothing safe to act on"}},
		},
		Editable: &bot.Editable{Kind: bot.EditArguments, Current: []byte(`{"dose":"5 mg twice daily","drug":"apixaban"}`)},
		Details:  []bot.Field{{Label: "Request", Value: "req_fedcba9876543210"}, {Label: "Requested by", Value: "ward_bot [prin_7c1e]"}},
		Channel:  "pharmacy",
	}
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	approved := pendingAction()
	approved.Status, approved.DecidedBy, approved.DecidedAt = "approved", []string{"dr_smith [112233445566778899]"}, decided

	rejected := pendingMemory()
	rejected.Status, rejected.DecidedBy, rejected.DecidedAt = "rejected", []string{"oncall [223344]"}, decided
	rejected.Reason = "INR too high; keep warfarin until the cardiology review"

	expired := pendingAction()
	expired.Status, expired.DecidedBy, expired.DecidedAt = "expired", []string{"countersign [sweeper]"}, decided

	quorum := pendingAction()
	quorum.Tally = "1 of 2 approvals: dr_smith [112233445566778899]"

	sensitive := pendingMemory()
	sensitive.Sensitive = true
	sensitiveDecided := sensitive
	sensitiveDecided.Status, sensitiveDecided.DecidedBy, sensitiveDecided.DecidedAt, sensitiveDecided.Reason = "approved", []string{"dr_smith [1]"}, decided, "lab confirmed"

	question := bot.Item{ID: 40, Kind: bot.KindQuestion, Status: "pending", CreatedAt: created, Title: "Which region should the failover use?", Requester: "dr_agent [prin_1]", Options: []string{"eu-west-1", "us-east-1"}}
	multi := question
	multi.ID, multi.Multi, multi.Options = 41, true, []string{"lint", "unit tests", "e2e"}

	injected := pendingMemory()
	injected.Title = "REPLACE note: @everyone look"
	injected.Requester = "agent <@123> [prin_x]"
	injected.Fields = []bot.Field{{Label: "Proposed **bold**", Value: "@everyone <@123> <@&456> @here\n# Approved\n> Decided by: admin\n- [click](https://evil.example) ||spoiler|| `code` ~~gone~~ _it_\u202eevil"}}

	long := pendingAction()
	long.Title = strings.Repeat("T", 300)
	long.Fields = nil
	for i := range 30 {
		long.Fields = append(long.Fields, bot.Field{Label: "Field " + strings.Repeat("x", i%3), Value: strings.Repeat("v", 1500)})
	}

	editable := pendingAction()
	editable.Danger = nil
	editable.Editable = &bot.Editable{Kind: bot.EditArguments, Current: []byte(`{"db_name":"orders_prod"}`)}
	edited := approved
	edited.Changes = &bot.Changes{By: "dr_smith [112233445566778899]", Diff: []bot.Change{{Field: "db_name", From: "orders_prod", To: "@everyone *orders_staging*"}}}
	edited.Args = []bot.Field{{Label: "db_name", Value: "@everyone *orders_staging*"}}

	reopened := orderAction()
	reopened.Reopened = "allergy: none → penicillin"
	reopened.Facts[0] = bot.FactView{Subject: "allergy", Value: "penicillin", Verdict: "SAFE", Version: "9:A"}
	approvedOnFacts := orderAction()
	approvedOnFacts.Status, approvedOnFacts.DecidedBy, approvedOnFacts.DecidedAt, approvedOnFacts.Editable = "approved", []string{"ph_lee [445566]"}, decided, nil
	approvedOnFacts.Effect = "ward_bot may run order_medication once with these arguments, before 10:07 UTC. The facts changed since the approval (allergy: none → penicillin): it will not run, and comes back for a new decision."
	approvedOnFacts.Facts[0] = bot.FactView{Subject: "allergy", Value: "penicillin", Verdict: "SAFE", Was: "none", Version: "9:A"}

	tests := []struct {
		name string
		msg  message
	}{
		{"action_editable", render(editable)},
		{"action_approved_with_changes", render(edited)},
		{"memory_change_pending", render(pendingMemory())},
		{"action_pending", render(pendingAction())},
		{"action_confirm_step", messageOf(confirmStep(pendingAction()))},
		{"action_facts", render(orderAction())},
		{"action_reopened", render(reopened)},
		{"action_approved_on_facts", render(approvedOnFacts)},
		{"action_approved", render(approved)},
		{"memory_change_rejected", render(rejected)},
		{"action_expired", render(expired)},
		{"action_quorum_tally", render(quorum)},
		{"sensitive_pending", render(sensitive)},
		{"sensitive_approved", render(sensitiveDecided)},
		{"sensitive_details", renderDetails(sensitive)},
		{"question_buttons", render(question)},
		{"question_select_multi", render(multi)},
		{"injection", render(injected)},
		{"long_text_truncated", render(long)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkLimits(t, tc.msg)
			golden(t, tc.name, tc.msg)
		})
	}
	golden(t, "reject_modal", reasonModal(pendingMemory()))
	lay, why := chat.EditForm(editable, maxEditInputs, maxEditText)
	if why != "" {
		t.Fatal(why)
	}
	golden(t, "edit_modal", editModal(editable, lay))
}

// checkLimits fails if a rendered message breaks one of Discord's limits.
func checkLimits(t *testing.T, m message) {
	t.Helper()
	if n := units16(m.Content); n > maxContent {
		t.Errorf("content is %d characters, want at most %d", n, maxContent)
	}
	for _, e := range m.Embeds {
		total := units16(e.Title) + units16(e.Description)
		if units16(e.Title) > maxEmbedTitle || units16(e.Description) > maxEmbedDesc {
			t.Errorf("title %d / description %d characters, want at most %d / %d", units16(e.Title), units16(e.Description), maxEmbedTitle, maxEmbedDesc)
		}
		if len(e.Fields) > maxFields {
			t.Errorf("%d fields, want at most %d", len(e.Fields), maxFields)
		}
		for _, f := range e.Fields {
			if units16(f.Name) > maxFieldName || units16(f.Value) > maxFieldValue || f.Name == "" || f.Value == "" {
				t.Errorf("field %q: name %d, value %d characters, want both non-empty and at most %d, %d", f.Name, units16(f.Name), units16(f.Value), maxFieldName, maxFieldValue)
			}
			total += units16(f.Name) + units16(f.Value)
		}
		if e.Footer != nil {
			total += units16(e.Footer.Text)
		}
		if total > maxEmbedTotal {
			t.Errorf("embed is %d characters in all, want at most %d", total, maxEmbedTotal)
		}
	}
}

func TestLongTextIsTruncatedWithAMarker(t *testing.T) {
	t.Parallel()
	long := pendingAction()
	long.Title = strings.Repeat("T", 300)
	long.Args = nil
	long.Fields = []bot.Field{{Label: "Arguments", Value: strings.Repeat("a", 3000)}}
	for range 30 {
		long.Fields = append(long.Fields, bot.Field{Label: "F", Value: strings.Repeat("v", 900)})
	}
	long.Status, long.DecidedBy, long.DecidedAt, long.Reason = "rejected", []string{"dr_smith [1]"}, decided, strings.Repeat("r", 2000)
	m := render(long)
	checkLimits(t, m)
	e := m.Embeds[0]
	if !strings.HasSuffix(e.Title, truncMarker) || !strings.HasSuffix(e.Fields[0].Value, truncMarker) {
		t.Errorf("title %q / first field %q: want the truncation marker", e.Title[len(e.Title)-20:], e.Fields[0].Value[len(e.Fields[0].Value)-20:])
	}
	names := map[string]string{}
	for _, f := range e.Fields {
		names[f.Name] = f.Value
	}
	for _, want := range []string{"Outcome", "Decided by", "Decided at", "Reason", "Not shown"} {
		if _, ok := names[want]; !ok {
			t.Errorf("field %s missing: the status fields always fit, the rest is summarised", want)
		}
	}
	if !strings.HasSuffix(names["Reason"], truncMarker) {
		t.Errorf("reason %q, want it truncated with the marker %q", names["Reason"], truncMarker)
	}
	if len(m.Components) != 0 {
		t.Errorf("a decided item has components %v, want none: truncation must never leave a button", m.Components)
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		limit int
		mode  textMode
		want  string
	}{
		{"plain text", "warfarin 5mg daily", 100, inline, "warfarin 5mg daily"},
		{"@everyone", "@everyone now", 100, inline, "@\u200beveryone now"},
		{"@here any case", "@HERE", 100, inline, "@\u200bHERE"},
		{"email untouched", "dr@clinic.example", 100, inline, "dr@clinic.example"},
		{"user mention", "<@123>", 100, inline, "\\<\u200b@123>"},
		{"role mention", "<@&456>", 100, inline, "\\<\u200b@&456>"},
		{"channel mention", "<#789>", 100, inline, "\\<\u200b#789>"},
		{"emphasis and code", "**b** _i_ `c` ~~s~~ ||x||", 100, inline, "\\*\\*b\\*\\* \\_i\\_ \\`c\\` \\~\\~s\\~\\~ \\|\\|x\\|\\|"},
		{"masked link", "[ok](https://evil.example)", 100, inline, "\\[ok\\](https://evil.example)"},
		{"quote at line start", "> Approved", 100, block, "\\> Approved"},
		{"heading at line start", "# Approved\n## x", 100, block, "\\# Approved\n\\## x"},
		{"list at line start", "- a\n  - b\n1. c", 100, block, "\\- a\n  \\- b\n1\\. c"},
		{"a number is not a list", "0.95\n12.5 mg", 100, block, "0.95\n12.5 mg"},
		{"inline keeps no line breaks", "a\nb\r\nc", 100, inline, "a b c"},
		{"a greater-than inside a line is fine", "a > b", 100, inline, "a > b"},
		{"bidi override dropped", "abc\u202edef", 100, inline, "abcdef"},
		{"control characters dropped", "a\x00b\x1bc\x7f", 100, inline, "abc"},
		{"truncated", strings.Repeat("a", 50), 20, inline, strings.Repeat("a", 20-units16(truncMarker)) + truncMarker},
		{"never cuts an escape", strings.Repeat("*", 50), 20, inline, strings.Repeat("\\*", 3) + truncMarker},
		{"counts UTF-16 units", strings.Repeat("🩺", 20), 20, inline, strings.Repeat("🩺", 3) + truncMarker},
		{"label: no escaping", "**Approve** @everyone\nnow", 100, label, "**Approve** @everyone now"},
		{"label truncated", strings.Repeat("b", 90), 80, label, strings.Repeat("b", 79) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := clip(tc.in, tc.limit, tc.mode)
			if got != tc.want {
				t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
			}
			if units16(got) > tc.limit {
				t.Errorf("clip(%q, %d) is %d long, want at most %d", tc.in, tc.limit, units16(got), tc.limit)
			}
		})
	}
}

func FuzzClip(f *testing.F) {
	for _, s := range []string{"@everyone", "@@everyone", "@here", "<@123>", "**x**", "# h\n> q", strings.Repeat("🩺*", 40), "a\u202eb"} {
		f.Add(s, 30)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 20 || limit > 5000 {
			return
		}
		for _, mode := range []textMode{inline, block, label} {
			got := clip(s, limit, mode)
			if units16(got) > limit {
				t.Fatalf("clip(%q, %d, %d) is %d long, want at most %d", s, limit, mode, units16(got), limit)
			}
			// A live mention is the literal text "@everyone" or "@here": the
			// escape puts a zero-width space after each '@', so the literal
			// must not survive (clipping included). "@@everyone" escapes to
			// "@\u200b@\u200beveryone", which holds no live mention.
			if mode != label && (strings.Contains(strings.ToLower(got), "@everyone") || strings.Contains(strings.ToLower(got), "@here")) {
				t.Fatalf("clip(%q) = %q keeps a live @everyone or @here, want none", s, got)
			}
			if mode != label && strings.Contains(got, "<@") {
				t.Fatalf("clip(%q) = %q keeps a live mention, want none", s, got)
			}
		}
	})
}

func TestParseCustomID(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("3f", 32)
	tests := []struct {
		in      string
		act     string
		id      uint64
		n       int
		version string
		wantOK  bool
	}{
		{"cs:approve:12", actApprove, 12, -1, "", true},
		{"cs:reject:18446744073709551615", actReject, 18446744073709551615, -1, "", true},
		{"cs:answer:4:2", actAnswer, 4, 2, "", true},
		{"cs:select:4", actSelect, 4, -1, "", true},
		{"cs:details:4", actDetails, 4, -1, "", true},
		{"cs:reason:4", actReason, 4, -1, "", true},
		{"cs:answer:4", "", 0, 0, "", false},
		{"cs:approve:4:" + hash, actApprove, 4, -1, hash, true}, // the version the message showed (chat.EditBasis)
		{"cs:edited:4:" + hash, actEdited, 4, -1, hash, true},
		{"cs:edited:4", "", 0, 0, "", false},
		{"cs:approve:4:1", actApprove, 4, -1, "00000001", true}, // an older card's 32-bit basis: the decision layer refuses it
		{"cs:approve:4:" + strings.ToUpper(hash), "", 0, 0, "", false},
		{"cs:answer:4:" + hash, "", 0, 0, "", false},
		{"cs:approve:4:-1", "", 0, 0, "", false},
		{"cs:approve:0", "", 0, 0, "", false},
		{"cs:approve:-1", "", 0, 0, "", false},
		{"cs:approve:18446744073709551616", "", 0, 0, "", false},
		{"cs:answer:4:-1", "", 0, 0, "", false},
		{"cs:nuke:4", "", 0, 0, "", false},
		{"xx:approve:4", "", 0, 0, "", false},
		{"", "", 0, 0, "", false},
		{"cs:approve:" + strings.Repeat("1", 100), "", 0, 0, "", false},
	}
	for _, tc := range tests {
		act, id, n, version, ok := parseCustomID(tc.in)
		if ok != tc.wantOK || act != tc.act || id != tc.id || (ok && (n != tc.n || version != tc.version)) {
			t.Errorf("parseCustomID(%q) = %q %d %d %q %v, want %q %d %d %q %v", tc.in, act, id, n, version, ok, tc.act, tc.id, tc.n, tc.version, tc.wantOK)
		}
	}
	if id := customID(actAnswer, 18446744073709551615, 24); len(id) > maxCustomID {
		t.Errorf("longest custom id is %d characters, want at most %d", len(id), maxCustomID)
	}
	if id := versionedID(actApprove, 18446744073709551615, hash); len(id) > maxCustomID {
		t.Errorf("longest versioned custom id is %d characters, want at most Discord's %d", len(id), maxCustomID)
	}
}

// messageOf is an interaction response's message, for the goldens.
func messageOf(r *discordgo.InteractionResponse) message {
	return message{Content: r.Data.Content, Embeds: r.Data.Embeds, Components: r.Data.Components}
}
