package discord

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/bot"
)

// modalInputs returns a modal's text inputs: custom id -> label, value.
func modalInputs(t *testing.T, d map[string]any) (labels, values map[string]string) {
	t.Helper()
	labels, values = map[string]string{}, map[string]string{}
	rows, _ := d["components"].([]any)
	for _, r := range rows {
		for _, c := range r.(map[string]any)["components"].([]any) {
			in := c.(map[string]any)
			if in["type"].(float64) != 4 {
				t.Fatalf("modal component %v, want a text input (type 4)", in)
			}
			id := in["custom_id"].(string)
			labels[id] = in["label"].(string)
			values[id], _ = in["value"].(string)
		}
	}
	return labels, values
}

func TestEditAndApproveInDiscord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := destructiveAction()
	st.Arguments = json.RawMessage(`{"db_name":"orders_prod","keep_days":30}`)
	id := e.newItem(bot.KindAction, "ops", st)
	consent := e.newItem(bot.KindConsent, "default", testState{Title: "May I email the family?"})
	e.drain()
	for _, c := range e.fake.CallsTo("POST", "channels/") {
		ids := strings.Join(customIDs(c.JSON()), " ")
		if strings.Contains(ids, customID(actApprove, consent)) && strings.Contains(ids, ":edit:") {
			t.Fatalf("a consent request got Edit & approve (%s), want none", ids)
		}
		if strings.Contains(ids, customID(actApprove, id)) && !strings.Contains(ids, customID(actEdit, id)) {
			t.Fatalf("the editable action's buttons %s, want Edit & approve", ids)
		}
	}
	ref := e.ref(id)

	modal := e.click("m1", smith, id, customID(actEdit, id))
	if respType(modal) != 9 {
		t.Fatalf("Edit & approve answered type %d, want 9 (a modal): %v", respType(modal), modal)
	}
	md := respData(t, modal)
	custom := md["custom_id"].(string)
	act, mid, _, _, ok := parseCustomID(custom)
	labels, values := modalInputs(t, md)
	if !ok || act != actEdited || mid != id || labels["e0"] != "db_name" || values["e0"] != "orders_prod" ||
		labels["e1"] != "keep_days" || values["e1"] != "30" || labels[noteInput] == "" || len(labels) != 3 {
		t.Fatalf("edit modal %q: labels %v values %v, want db_name orders_prod, keep_days 30 and a note", custom, labels, values)
	}
	if e.state(id).Status != "pending" {
		t.Fatal("opening the edit form decided the item")
	}

	submit := func(iid string, who discordtest.Clicker, vals map[string]string) map[string]any {
		_, resp := e.post(discordtest.SubmitForm(iid, who, ref.ChannelID, ref.MessageID, custom, vals))
		return resp
	}
	// Not a number, then a db_name the tool refuses: private, nothing recorded.
	wantPrivate(t, submit("s1", smith, map[string]string{"e0": "orders_prod", "e1": "thirty"}), "keep\\_days must be a number", "Nothing was recorded")
	wantPrivate(t, submit("s2", smith, map[string]string{"e0": "Orders!", "e1": "7"}), "lowercase letters", "Nothing was recorded")
	// An unmapped member: refused privately and audited.
	wantPrivate(t, submit("s3", stranger, map[string]string{"e0": "orders_staging", "e1": "7"}), "not mapped")
	if !e.auditHas("access_denied", uStranger) {
		t.Fatalf("audit %v, want the stranger's edit audited", e.audit())
	}
	if got := e.state(id); got.Status != "pending" || got.Applied != 0 || got.EditedBy != "" {
		t.Fatalf("after a refused edit: %+v, want pending, nothing applied or edited", got)
	}

	// A valid edit updates the message in place; replayed, it applies once.
	ok7 := submit("s4", smith, map[string]string{"e0": "orders_staging", "e1": "7", noteInput: "prod is frozen"})
	if respType(ok7) != 7 {
		t.Fatalf("valid edit answered %v, want type 7", ok7)
	}
	if v, _ := fieldValue(embed(t, respData(t, ok7)), "Changes"); !strings.Contains(v, "Approved with changes by dr\\_smith \\[111\\]: db\\_name orders\\_prod → orders\\_staging; keep\\_days 30 → 7") {
		t.Fatalf("Changes field %q, want the changes by dr_smith [111]", v)
	}
	if ids := customIDs(respData(t, ok7)); len(ids) != 0 {
		t.Fatalf("decided message keeps components %v, want none", ids)
	}
	again := submit("s4", smith, map[string]string{"e0": "orders_staging", "e1": "7"})
	if respType(again) == 7 {
		t.Fatalf("a replayed submission answered %v, want it not applied again", again)
	}
	got := e.state(id)
	if got.Status != "approved" || got.Applied != 1 || got.EditedBy != "dr_smith [111]" ||
		string(got.Arguments) != `{"db_name":"orders_staging","keep_days":7}` || string(got.ProposedArgs) != `{"db_name":"orders_prod","keep_days":30}` {
		t.Fatalf("after the edit: %+v (args %s), want approved once by dr_smith with the edited arguments and the proposed ones kept", got, got.Arguments)
	}
}

func TestEditMemoryValueInDiscord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := memoryChange()
	st.Value = "apixaban 5mg twice daily"
	id := e.newItem(bot.KindMemoryChange, "default", st)
	e.drain()
	ref := e.ref(id)
	md := respData(t, e.click("m1", oncall, id, customID(actEdit, id)))
	labels, values := modalInputs(t, md)
	if labels["e0"] != "Value" || values["e0"] != "apixaban 5mg twice daily" {
		t.Fatalf("memory edit modal: labels %v values %v, want Value apixaban 5mg twice daily", labels, values)
	}
	// A form opened before someone else's edit (another basis) is refused.
	stale := customID(actEdited, id, 0)
	_, resp := e.post(discordtest.SubmitForm("s0", oncall, ref.ChannelID, ref.MessageID, stale, map[string]string{"e0": "apixaban 2.5mg twice daily"}))
	wantPrivate(t, resp, "changed after you opened")
	_, resp = e.post(discordtest.SubmitForm("s1", oncall, ref.ChannelID, ref.MessageID, md["custom_id"].(string), map[string]string{"e0": "apixaban 2.5mg twice daily"}))
	if respType(resp) != 7 {
		t.Fatalf("valid value edit answered %v, want type 7", resp)
	}
	if got := e.state(id); got.Status != "approved" || got.Value != "apixaban 2.5mg twice daily" || got.ProposedValue != "apixaban 5mg twice daily" {
		t.Fatalf("after the value edit: %+v, want approved with the edited value and the proposed one kept", got)
	}
}
