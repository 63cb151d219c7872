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

func memoryItem() bot.Item {
	return bot.Item{
		ID: 7, Kind: bot.KindMemoryChange, Title: "Replace active_medication for patient default",
		Requester: "intake_agent [prin_4f2a9c]", CreatedAt: asked, Status: "pending", Channel: "default",
		Fields: []bot.Field{
			{Label: "Subject", Value: "active_medication"},
			{Label: "Current", Value: "warfarin 5mg daily"},
			{Label: "Proposed", Value: "apixaban 5mg twice daily"},
			{Label: "Said", Value: "Switch her to apixaban 5mg twice daily, stop the warfarin tonight."},
		},
		Editable: &bot.Editable{Kind: bot.EditValue, Current: json.RawMessage(`"apixaban 5mg twice daily"`)},
	}
}

func actionItem() bot.Item {
	return bot.Item{
		ID: 12, Kind: bot.KindAction, Title: "delete_database (destructive) requested by deploy_bot",
		Requester: "deploy_bot [prin_9a0b1c]", CreatedAt: asked, ExpiresAt: expires, Status: "pending", Channel: "ops",
		Fields: []bot.Field{
			{Label: "Tool", Value: "delete_database"},
			{Label: "Category", Value: "destructive"},
			{Label: "Arguments", Value: `{"db_name": "orders_prod"}`},
			{Label: "Dry-run plan", Value: "DROP DATABASE orders_prod;\n-- 42 tables"},
		},
		WebURL: "https://countersign.example/ui/items/12", Version: strings.Repeat("ab", 32),
	}
}

func restartItem() bot.Item {
	return bot.Item{
		ID: 14, Kind: bot.KindAction, Title: "restart_service requested by ops_agent",
		Requester: "ops_agent [prin_1]", CreatedAt: asked, ExpiresAt: expires, Status: "pending", Channel: "ops",
		Fields:   []bot.Field{{Label: "Tool", Value: "restart_service"}, {Label: "Category", Value: "mutating"}, {Label: "Arguments", Value: `{"service": "payments", "replicas": 3}`}},
		Editable: &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(`{"service": "payments", "replicas": 3}`)},
		Version:  strings.Repeat("cd", 32),
		Grants:   []bot.GrantOption{{Kind: "session", Label: "Approve for this session"}, {Kind: "duration", For: "1h", Label: "Approve for 1h"}},
	}
}

// cards are the cards the adapter draws, by golden name.
func cards() map[string]*card {
	injection := actionItem()
	injection.Title = "**Approve** [me](https://evil.example) <at>everyone</at> \u202eevil"
	injection.Fields = []bot.Field{{Label: "Arguments", Value: "# heading\n- [x](javascript:alert(1))\x07"}}
	quorum := restartItem()
	quorum.Tally = "1 of 2 approvals: dr_smith [U1]"
	approved := memoryItem()
	approved.Status, approved.DecidedBy, approved.DecidedAt, approved.Editable = "approved", []string{"dr_smith [00000000-0000-0000-0000-000000000001]"}, decided, nil
	rejected := actionItem()
	rejected.Status, rejected.DecidedBy, rejected.DecidedAt, rejected.Reason = "rejected", []string{"nurse_jo"}, decided, "Not during the freeze."
	expired := restartItem()
	expired.Status, expired.Reason, expired.Editable = "expired", "denied by automatic policy: nobody answered.", nil
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
			t.Fatalf("%s: %v (run go test -update to write it)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (go test -update rewrites it):\ngot:\n%s", name, path, got)
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
		t.Fatalf("the Adaptive Cards parser found problems (%v):\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 problems") {
		t.Fatalf("unexpected output:\n%s", out)
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
			t.Errorf("untrusted text in a TextBlock: %q", tb.Text)
		}
	}
	for _, bad := range []string{"\u202e", "\\u0007", "\x07"} {
		if strings.Contains(string(raw), bad) {
			t.Errorf("the card keeps %q: %s", bad, raw)
		}
	}
	if !strings.Contains(string(raw), "**Approve** [me](https://evil.example)") {
		t.Errorf("the title is not shown literally: %s", raw)
	}
	n := c
	n.Body = nil
	if got := escapeMarkdown("**bold** [x](y)"); got != `\*\*bold\*\* \[x\]\(y\)` {
		t.Errorf("escapeMarkdown = %q", got)
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
		t.Errorf("buttons: shared %v, approver %v", cs["memory_shared"].Actions, cs["memory_approver"].Actions)
	}
	if cs["memory_approved"].Refresh != nil || has(cs["memory_approved"], verbApprove) {
		t.Errorf("the decided card still refreshes or has buttons: %+v", cs["memory_approved"])
	}
	if has(cs["destructive_approver"], verbEdit) || !has(cs["destructive_confirm"], verbConfirm) {
		t.Errorf("a destructive item: edit offered or no confirmation step")
	}
}
