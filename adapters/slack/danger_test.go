package slack

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

func dangerItem(dryRun string) testItem {
	return testItem{Title: "Drop orders_prod", Requester: "deploy_bot", Status: "pending",
		Fields: []bot.Field{{Label: "Dry-run plan", Value: dryRun}},
		Danger: &bot.Danger{Warning: "⚠ delete_database is destructive: approving it cannot be undone.", Target: "orders_prod", TargetLabel: "db_name",
			Confirm: "delete_database runs once on db_name orders_prod and cannot be undone."},
		Details: []bot.Field{{Label: "Request", Value: "req_0123456789abcdef"}, {Label: "Requested by", Value: "deploy_bot [prin_deploy_bot]"}}}
}

// posted returns the card posted for item id and its Approve button's
// value.
func (e *env) posted(t *testing.T, id uint64) (blocks []any, approve string) {
	t.Helper()
	e.drain()
	ref := e.ref(id)
	for _, c := range e.fake.Calls("chat.postMessage") {
		if c.Form.Get("channel") != ref.ChannelID {
			continue
		}
		var bs []map[string]any
		_ = json.Unmarshal([]byte(c.Form.Get("blocks")), &bs)
		for _, b := range bs {
			if b["block_id"] != blockPrefix+itoa(id) {
				continue
			}
			for _, el := range b["elements"].([]any) {
				if el := el.(map[string]any); el["action_id"] == actionApprove {
					approve, _ = el["value"].(string)
				}
			}
			for _, b := range bs {
				blocks = append(blocks, b)
			}
			return blocks, approve
		}
	}
	t.Fatalf("no card posted for #%d, want one with an Approve button", id)
	return nil, ""
}

// TestDangerousCardClicks: a dangerous card's Approve carries the
// confirmation dialog's mark; a click on a card cut to fit is refused
// privately, pointing at the console, even through the dialog; the
// Details button answers privately with the folded detail. (That a click
// counts only through the dialog: adapters/chattest's
// TestDestructiveApprovalTakesASecondConfirmation, with Discord's and
// Teams' second step.)
func TestDangerousCardClicks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.create(bot.KindAction, "ops", dangerItem("DROP DATABASE orders_prod;"))
	_, value := e.posted(t, id)
	if !strings.HasSuffix(value, confirmedMark) {
		t.Fatalf("the dangerous Approve's value is %q, want it to end with the confirmation mark %q", value, confirmedMark)
	}
	ref := e.ref(id)

	// The Details button: the folded detail, privately.
	e.interact(clickPayload("U0123ABC", actionDetails, itoa(id), ref, newTrigger()))
	e.barrier()
	if eph := e.ephemerals("U0123ABC"); len(eph) != 1 || !strings.Contains(eph[0].Form.Get("text"), "req_0123456789abcdef") || !strings.Contains(eph[0].Form.Get("text"), "deploy_bot [prin_deploy_bot]") {
		t.Fatalf("the Details answer: %v, want one private answer naming req_0123456789abcdef and deploy_bot [prin_deploy_bot]", eph)
	}

	// A card cut to fit: refused even through the dialog.
	long := e.create(bot.KindAction, "ops", dangerItem(strings.Repeat("DROP TABLE t; ", 400)))
	lblocks, lvalue := e.posted(t, long)
	lref := e.ref(long)
	p := clickPayload("U0123ABC", actionApprove, lvalue, lref, newTrigger())
	p["message"] = map[string]any{"ts": lref.MessageID, "blocks": lblocks}
	e.interact(p)
	e.barrier()
	if st := e.state(long); st.Status != "pending" {
		t.Fatalf("after a click on a truncated dangerous card: %+v, want pending", st)
	}
	if eph := e.ephemerals("U0123ABC"); len(eph) != 2 || !strings.Contains(eph[1].Form.Get("text"), "was cut to fit") || !strings.Contains(eph[1].Form.Get("text"), "web console") {
		t.Fatalf("the private answer to a truncated card: %v, want one saying it was cut to fit and pointing at the web console", eph)
	}
}

// TestCardTextIsWhatTheCardShows: a card's text (what a click's seen hash
// is over) holds its header, its lines and its buttons' dialog, and says
// when anything was cut.
func TestCardTextIsWhatTheCardShows(t *testing.T) {
	t.Parallel()
	it := actionItem()
	text, cut := cardText(itemBlocks(it, false))
	for _, want := range []string{it.Title, "*If you approve:* deploy_bot runs delete_database once", "`orders_prod`", "delete_database runs once on db_name orders_prod and cannot be undone. You will be recorded as its approver.", "Yes, approve #12"} {
		if !strings.Contains(text, want) {
			t.Errorf("the card's text lacks %q:\n%s", want, text)
		}
	}
	if cut {
		t.Error("a whole card reads as cut")
	}
	it.Fields = append(it.Fields, bot.Field{Label: "Plan", Value: strings.Repeat("x", 4000)})
	if _, cut := cardText(itemBlocks(it, false)); !cut {
		t.Error("a card cut to fit reads as whole")
	}
}

func itoa(id uint64) string { return strconv.FormatUint(id, 10) }
