package teams

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/internal/nodetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	asked   = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	expires = asked.Add(30 * time.Minute)
	decided = asked.Add(12 * time.Minute)
)

// The fixtures are items as the core's sources make them (bot/memorytools,
// bot/actiontools), as in Slack's and Discord's render tests: the card's
// lines computed there, the developer detail under Details.
func memoryItem() bot.Item {
	return bot.Item{
		ID: 7, Kind: bot.KindMemoryChange, Title: "patient_42's active_medication: warfarin 5mg daily → apixaban 5mg twice daily",
		Requester: "intake_agent [prin_4f2a9c]", CreatedAt: asked, Status: "pending", Channel: "default",
		Effect: "apixaban 5mg twice daily becomes patient_42's active_medication for every agent, replacing warfarin 5mg daily; nothing is ordered or run.",
		Asked:  "Every change to active_medication waits for a person: it is a confirm slot of the slot schema.",
		Fields: []bot.Field{
			{Label: "Current value", Value: "warfarin 5mg daily"},
			{Label: "Proposed value", Value: "apixaban 5mg twice daily"},
			{Label: "Said", Value: "Switch her to apixaban 5mg twice daily, stop the warfarin tonight."},
		},
		Details: []bot.Field{
			{Label: "Memory", Value: "#3"}, {Label: "Space", Value: "patient_42"}, {Label: "Subject", Value: "active_medication"},
			{Label: "Proposed by", Value: "intake_agent [prin_4f2a9c]"},
		},
		Editable: &bot.Editable{Kind: bot.EditValue, Current: json.RawMessage(`"apixaban 5mg twice daily"`)},
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
			{Label: "Dry-run plan", Value: "DROP DATABASE orders_prod;\n-- 42 tables"},
		},
		Details: []bot.Field{
			{Label: "Request", Value: "req_0123456789abcdef"}, {Label: "Tool", Value: "delete_database"},
			{Label: "Arguments (JSON)", Value: `{"cascade":true,"db_name":"orders_prod"}`},
			{Label: "Configured", Value: "category destructive, mechanics dry_run_confirm"},
			{Label: "Requested by", Value: "deploy_bot [prin_9a0b1c]"},
		},
		WebURL: "https://countersign.example/ui/items/12", Version: strings.Repeat("ab", 32),
	}
}

func restartItem() bot.Item {
	return bot.Item{
		ID: 14, Kind: bot.KindAction, Title: "payments is out of memory",
		Requester: "ops_agent [prin_1]", CreatedAt: asked, ExpiresAt: expires, Status: "pending", Channel: "ops",
		Effect:   "ops_agent runs restart_service once with these arguments, within 1 hour of the approval.",
		Asked:    "restart_service is configured as mutating, so a person approves every call.",
		Args:     []bot.Field{{Label: "replicas", Value: "3"}, {Label: "service", Value: "payments"}},
		Details:  []bot.Field{{Label: "Request", Value: "req_14"}, {Label: "Tool", Value: "restart_service"}},
		Editable: &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(`{"replicas":3,"service":"payments"}`)},
		Version:  strings.Repeat("cd", 32),
		Grants:   []bot.GrantOption{{Kind: "session", Label: "Approve for this session"}, {Kind: "duration", For: "1h", Label: "Approve for 1h"}},
	}
}

// orderItem is a mutating call whose approval rests on facts: one SAFE,
// one BLOCKED before anyone clicks; one vote cast, with what it saw.
func orderItem() bot.Item {
	return bot.Item{
		ID: 15, Kind: bot.KindAction, Title: "Start apixaban 5 mg twice daily for patient_42",
		Requester: "ward_bot [prin_7c1e]", CreatedAt: asked, ExpiresAt: expires, Status: "pending", Channel: "pharmacy",
		Effect: "ward_bot runs order_medication once with these arguments, within 1 hour of the approval. If allergy or active_medication changes first, it does not run and comes back for a new decision.",
		Asked:  "order_medication is configured as mutating, so a person approves every call; the approval rests on allergy and active_medication as they are when you approve.",
		Args:   []bot.Field{{Label: "dose", Value: "5 mg twice daily"}, {Label: "drug", Value: "apixaban"}},
		Facts: []bot.FactView{
			{Subject: "allergy", Value: "none", Verdict: "SAFE", Version: "3:A"},
			{Subject: "active_medication", Value: "none", Verdict: "BLOCKED", Reasons: []string{"no active fact for this subject — nothing safe to act on"}},
		},
		Tally:   "1 of 2 approvals: dr_smith",
		Details: []bot.Field{{Label: "Request", Value: "req_fedcba9876543210"}, {Label: "Requested by", Value: "ward_bot [prin_7c1e]"}},
		Votes: []bot.VoteView{{By: "dr_smith [prin_smith]", Approve: true, At: decided, Counts: true,
			Seen: &bot.Seen{SHA256: strings.Repeat("3f", 32), Surface: bot.SurfaceTeams}}},
		Version: strings.Repeat("ef", 32),
	}
}

// cards are the cards the adapter draws, by golden name.
func cards() map[string]*card {
	injection := actionItem()
	injection.Title = "**Approve** [me](https://evil.example) <at>everyone</at> \u202eevil"
	injection.Danger = nil
	injection.Fields = []bot.Field{{Label: "Arguments", Value: "# heading\n- [x](javascript:alert(1))\x07"}}
	injection.Args = []bot.Field{{Label: "**db**", Value: "<at>everyone</at> [x](https://evil.example)"}}
	injection.Effect = "deploy_bot runs **delete** [now](https://evil.example)"
	quorum := restartItem()
	quorum.Tally = "1 of 2 approvals: dr_smith [U1]"
	approved := memoryItem()
	approved.Status, approved.DecidedBy, approved.DecidedAt, approved.Editable = "approved", []string{"dr_smith [00000000-0000-0000-0000-000000000001]"}, decided, nil
	rejected := actionItem()
	rejected.Status, rejected.DecidedBy, rejected.DecidedAt, rejected.Reason = "rejected", []string{"nurse_jo"}, decided, "Not during the freeze."
	expired := restartItem()
	expired.Status, expired.Reason, expired.Editable = "expired", "denied by automatic policy: nobody answered.", nil
	expired.Effect = "Nothing runs: ops_agent was told not to run restart_service."
	reopened := orderItem()
	reopened.Reopened = "allergy: none → penicillin"
	reopened.Facts[0] = bot.FactView{Subject: "allergy", Value: "penicillin", Verdict: "SAFE", Version: "9:A"}
	onFacts := orderItem()
	onFacts.Status, onFacts.DecidedBy, onFacts.DecidedAt, onFacts.Tally = "approved", []string{"ph_lee [prin_lee]", "dr_smith [prin_smith]"}, decided, ""
	onFacts.Effect = "ward_bot may run order_medication once with these arguments, before 10:12 UTC. The facts changed since the approval (allergy: none → penicillin): it will not run, and comes back for a new decision."
	onFacts.Facts[0] = bot.FactView{Subject: "allergy", Value: "penicillin", Verdict: "SAFE", Was: "none", Version: "9:A"}
	long := actionItem()
	long.Fields = []bot.Field{{Label: "Dry-run plan", Value: strings.Repeat("DROP TABLE t; ", 2000)}}
	sensitive := memoryItem()
	sensitive.Sensitive = true
	single := bot.Item{ID: 20, Kind: bot.KindQuestion, Title: "Which ward?", Requester: "agent [p]", CreatedAt: asked, Status: "pending", Options: []string{"Ward 7", "Ward 9"}}
	multi := single
	multi.ID, multi.Multi = 21, true
	lay, _ := chat.EditForm(restartItem(), maxEditInput, maxEditText)
	return map[string]*card{
		"memory_shared":        itemCard(memoryItem(), view{}, []string{"29:a"}),
		"memory_approver":      itemCard(memoryItem(), view{buttons: true}, []string{"29:a"}),
		"action_approver":      itemCard(restartItem(), view{buttons: true}, []string{"29:a"}),
		"action_quorum_shared": itemCard(quorum, view{}, []string{"29:a", "29:b"}),
		"destructive_approver": itemCard(actionItem(), view{buttons: true}, nil),
		"destructive_confirm":  confirmCard(actionItem()),
		"destructive_cut":      confirmCard(long),
		"destructive_shared":   itemCard(actionItem(), view{}, []string{"29:a"}),
		"facts_approver":       itemCard(orderItem(), view{buttons: true, folded: true}, []string{"29:a"}),
		"facts_reopened":       itemCard(reopened, view{}, []string{"29:a"}),
		"facts_approved":       itemCard(onFacts, view{folded: true}, nil),
		"memory_approved":      itemCard(approved, view{}, nil),
		"action_rejected":      itemCard(rejected, view{}, nil),
		"action_expired":       itemCard(expired, view{}, nil),
		"sensitive_shared":     itemCard(sensitive, view{buttons: true}, nil),
		"sensitive_details":    itemCard(sensitive, view{buttons: true, details: true}, nil),
		"question_single":      itemCard(single, view{buttons: true}, nil),
		"question_multi":       itemCard(multi, view{buttons: true}, nil),
		"reject_form":          reasonCard(actionItem(), ""),
		"edit_form":            editCard(restartItem(), lay, nil, ""),
		"edit_form_error":      editCard(restartItem(), lay, map[string]string{"edit_1": "three"}, "replicas: replicas must be a number, such as 2.5."),
		"refused_notice":       itemCard(restartItem(), view{notice: "Access denied: you requested it", noticeColor: colorAttention}, nil),
		"injection":            itemCard(injection, view{buttons: true}, nil),
	}
}

func TestCardGolden(t *testing.T) {
	for name, c := range cards() {
		got, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", name+".golden.json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v, want the golden file (run go test -update to write it)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s, want it equal (go test -update rewrites it):\ngot:\n%s", name, path, got)
		}
	}
}

// TestCardsParseWithTheAdaptiveCardsParser runs every card the adapter
// draws through the Adaptive Cards parser from npm (adaptivecards 3.0.6):
// no unknown element or action, no validation event, every property kept.
func TestCardsParseWithTheAdaptiveCardsParser(t *testing.T) {
	dir := nodetest.Dir(t, "adaptivecards")
	raw, err := json.Marshal(cards())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cards.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := nodetest.Cmd(t, dir, "check_adaptive_cards.cjs", file).CombinedOutput()
	if err != nil {
		t.Fatalf("the Adaptive Cards parser found problems (%v), want none:\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 problems") {
		t.Fatalf("parser output:\n%s\nwant it to report 0 problems", out)
	}
}

// TestUntrustedTextIsNeverMarkdown: an item's words reach a card only in
// places Teams shows literally (TextRun, action titles, inputs), never in
// a TextBlock, which Teams reads as Markdown; bidirectional overrides and
// control characters are dropped.
func TestUntrustedTextIsNeverMarkdown(t *testing.T) {
	c := cards()["injection"]
	raw, _ := json.Marshal(c)
	for _, el := range c.Body {
		if tb, ok := el.(textBlock); ok && (strings.Contains(tb.Text, "evil") || strings.Contains(tb.Text, "heading")) {
			t.Errorf("untrusted text in a TextBlock (%q), want it only in RichTextBlocks", tb.Text)
		}
	}
	for _, bad := range []string{"\u202e", "\\u0007", "\x07"} {
		if strings.Contains(string(raw), bad) {
			t.Errorf("the card keeps %q, want it cleaned: %s", bad, raw)
		}
	}
	if !strings.Contains(string(raw), "**Approve** [me](https://evil.example)") {
		t.Errorf("the card %s, want the title shown literally: **Approve** [me](https://evil.example)", raw)
	}
	n := c
	n.Body = nil
	if got := escapeMarkdown("**bold** [x](y)"); got != `\*\*bold\*\* \[x\]\(y\)` {
		t.Errorf("escapeMarkdown = %q, want %q", got, `\*\*bold\*\* \[x\]\(y\)`)
	}
}

// TestButtonsOnlyForTheApprover: the shared card names the approvers in
// refresh.userIds and has no decision buttons; the approver's view has
// them; a decided card has neither.
func TestButtonsOnlyForTheApprover(t *testing.T) {
	cs := cards()
	if cs["memory_shared"].Refresh == nil || strings.Join(cs["memory_shared"].Refresh.UserIDs, ",") != "29:a" {
		t.Errorf("shared card refresh = %+v, want userIds [29:a]", cs["memory_shared"].Refresh)
	}
	has := func(c *card, verb string) bool {
		for _, a := range c.Actions {
			if e, ok := a.(execute); ok && e.Verb == verb {
				return true
			}
		}
		return false
	}
	if has(cs["memory_shared"], verbApprove) || !has(cs["memory_approver"], verbApprove) || !has(cs["memory_approver"], verbEdit) {
		t.Errorf("buttons: shared %v, approver %v; want Approve and Edit only on the approver's", cs["memory_shared"].Actions, cs["memory_approver"].Actions)
	}
	if cs["memory_approved"].Refresh != nil || has(cs["memory_approved"], verbApprove) {
		t.Errorf("the decided card %+v, want no refresh and no buttons", cs["memory_approved"])
	}
	if has(cs["destructive_approver"], verbEdit) || !has(cs["destructive_confirm"], verbConfirm) {
		t.Errorf("a destructive item: approver's actions %v, confirm step's %v; want no Edit and a confirmation step", cs["destructive_approver"].Actions, cs["destructive_confirm"].Actions)
	}
	if has(cs["destructive_cut"], verbConfirm) {
		t.Errorf("a dangerous item whose card is cut to fit offers %+v, want no confirmation button", cs["destructive_cut"].Actions)
	}
}

// texts are the card's shown texts (cardText), one a line.
func texts(c *card) string {
	t, _ := cardText(c)
	return t
}

// TestCardSaysWhatSlackSays: a Teams card carries the card's lines for
// the person clicking in chat's words, as Slack's and Discord's do: the
// danger warning, what approving does, the facts it rests on, the
// arguments, why a person is asked, the reopening, and the folded Details
// with the votes and what each voter saw; the confirmation step says
// chat's confirmation sentence.
func TestCardSaysWhatSlackSays(t *testing.T) {
	cs := cards()
	order, danger := orderItem(), actionItem()
	reopened := order
	reopened.Reopened = "allergy: none → penicillin"
	want := map[string][]string{
		"facts_approver": {
			chat.EffectLabel(order), order.Effect, chat.FactsHeading(order),
			chat.FactLine(order.Facts[0]), chat.FactLine(order.Facts[1]), chat.ArgsLabel,
			"dose: ", "5 mg twice daily", chat.AskedLabel, order.Asked,
			chat.DetailsLabel, "• Request: req_fedcba9876543210", "Votes:", "• " + chat.VoteLine(order.Votes[0]),
		},
		"facts_reopened":       {chat.ReopenedLine(reopened)},
		"facts_approved":       {"Approved on these facts:", "penicillin (approved on: none)", "Now:"},
		"destructive_approver": {danger.Danger.Warning, chat.EffectLabel(danger), danger.Effect, "db_name: ", "orders_prod"},
		"destructive_confirm":  {chat.ConfirmTitle(danger), chat.ConfirmText(danger), chat.ConfirmButton(danger), danger.Danger.Warning},
		"destructive_cut":      {"does not fit whole on a Teams card"},
	}
	for name, lines := range want {
		got := texts(cs[name])
		for _, l := range lines {
			if !strings.Contains(got, l) {
				t.Errorf("%s, want it to say %q; it says:\n%s", name, l, got)
			}
		}
	}
	// The shared card asks for the Details (chat.ShowDetails decides who
	// may read them); the approver's view carries them folded.
	shared, approver := cs["destructive_shared"], cs["facts_approver"]
	if strings.Contains(texts(shared), "req_0123456789abcdef") {
		t.Errorf("the shared card shows the folded detail, want it folded away: %s", texts(shared))
	}
	inBody := func(c *card) []any {
		var out []any
		for _, el := range c.Body {
			if s, ok := el.(actionSet); ok {
				out = append(out, s.Actions...)
			}
		}
		return out
	}
	folded := func(c *card) bool {
		for _, a := range inBody(c) {
			if s, ok := a.(showCard); ok && s.Title == chat.DetailsLabel {
				return true
			}
		}
		return false
	}
	asks := func(c *card) bool {
		for _, a := range inBody(c) {
			if e, ok := a.(execute); ok && e.Verb == verbDetails {
				return true
			}
		}
		return false
	}
	if folded(shared) || !asks(shared) || !folded(approver) || asks(approver) {
		t.Errorf("Details: shared folded=%v asks=%v, approver folded=%v asks=%v; want the shared card to ask and the approver's to fold", folded(shared), asks(shared), folded(approver), asks(approver))
	}
}

// TestDangerLooksDangerous: on an item that cannot be undone Approve is
// the destructive button and Reject is not; elsewhere the reverse.
func TestDangerLooksDangerous(t *testing.T) {
	styles := func(c *card) (approve, reject string) {
		for _, a := range c.Actions {
			if e, ok := a.(execute); ok {
				switch e.Verb {
				case verbApprove:
					approve = e.Style
				case verbReject:
					reject = e.Style
				}
			}
		}
		return
	}
	cs := cards()
	if a, r := styles(cs["destructive_approver"]); a != styleDestructive || r != "" {
		t.Errorf("dangerous item: Approve %q, Reject %q; want destructive, default", a, r)
	}
	if a, r := styles(cs["action_approver"]); a != stylePositive || r != styleDestructive {
		t.Errorf("ordinary item: Approve %q, Reject %q; want positive, destructive", a, r)
	}
}

// TestSealedButtonsNameTheCard: an approver's Approve carries the SHA-256
// of the text of the card it is on (bot.Seen), and a cut card says so.
func TestSealedButtonsNameTheCard(t *testing.T) {
	c := cards()["facts_approver"]
	text, cut := cardText(c)
	want := bot.SeenText(bot.SurfaceTeams, text, cut)
	for _, a := range c.Actions {
		if e, ok := a.(execute); ok && e.Verb == verbApprove {
			got := seenOf(e.Data)
			if got == nil || *got != *want {
				t.Errorf("Approve's seen = %+v, want %+v", got, want)
			}
			return
		}
	}
	t.Fatal("no Approve on the approver's card")
}
