package slack

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

// editableAction is an action request whose flat arguments can be edited.
func editableAction() testItem {
	it := actionTestItem()
	it.Arguments = json.RawMessage(`{"db_name":"orders_prod","keep_days":30}`)
	return it
}

// editPayload is a view_submission of the edit modal: values by block id.
func editPayload(user, metadata string, values map[string]string, note, trigger string) map[string]any {
	state := map[string]any{}
	for block, v := range values {
		state[block] = map[string]any{editAction: map[string]any{"type": "plain_text_input", "value": v}}
	}
	state[noteBlock] = map[string]any{noteAction: map[string]any{"type": "plain_text_input", "value": note}}
	return map[string]any{
		"type":       "view_submission",
		"trigger_id": trigger,
		"user":       map[string]any{"id": user},
		"team":       map[string]any{"id": "T1"},
		"view": map[string]any{
			"id": "VEDIT", "callback_id": callbackEdit, "private_metadata": metadata,
			"state": map[string]any{"values": state},
		},
	}
}

// viewErrors decodes a response_action: errors acknowledgement.
func viewErrors(t *testing.T, code int, body string) map[string]string {
	t.Helper()
	var resp struct {
		Action string            `json:"response_action"`
		Errors map[string]string `json:"errors"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &resp) != nil || resp.Action != "errors" {
		t.Fatalf("want a response_action: errors acknowledgement, got %d %q", code, body)
	}
	return resp.Errors
}

// openEdit clicks Edit & approve as user and returns the modal Slack was
// asked to open.
func (e *env) openEdit(user string, id uint64) map[string]any {
	e.t.Helper()
	before := len(e.fake.Calls("views.open"))
	trigger := newTrigger()
	if code, _ := e.interact(clickPayload(user, actionEdit, strconv.FormatUint(id, 10), e.ref(id), trigger)); code != http.StatusOK {
		e.t.Fatal(code)
	}
	e.barrier()
	opens := e.fake.Calls("views.open")
	if len(opens) != before+1 {
		e.t.Fatalf("%d views.open calls after the click, want %d", len(opens), before+1)
	}
	if opens[before].JSON["trigger_id"] != trigger {
		e.t.Fatalf("views.open with trigger %v, want %s", opens[before].JSON["trigger_id"], trigger)
	}
	return opens[before].JSON["view"].(map[string]any)
}

// inputs returns the modal's input blocks: block id -> label, initial value.
func inputs(view map[string]any) (labels, initial map[string]string) {
	labels, initial = map[string]string{}, map[string]string{}
	for _, b := range view["blocks"].([]any) {
		m := b.(map[string]any)
		if m["type"] != "input" {
			continue
		}
		id := m["block_id"].(string)
		labels[id] = m["label"].(map[string]any)["text"].(string)
		el := m["element"].(map[string]any)
		initial[id], _ = el["initial_value"].(string)
	}
	return labels, initial
}

func TestEditAndApproveInSlack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.create(bot.KindAction, "ops", editableAction())
	question := e.create(bot.KindQuestion, "default", testItem{Title: "Which ward?", Requester: "triage_agent", Options: []string{"A", "B"}})
	consent := e.create(bot.KindConsent, "default", testItem{Title: "May I email the family?", Requester: "care_agent"})
	e.drain()
	for _, c := range e.fake.Calls("chat.postMessage") {
		b := buttons(t, c)
		editable := strings.HasPrefix(b[actionApprove], strconv.FormatUint(id, 10)+":") // the Approve of an editable item carries its version
		if _, has := b[actionEdit]; has != editable {
			t.Fatalf("Edit & approve on %v (action #%d, question #%d, consent #%d): has it %v, want %v (only the editable action)", b, id, question, consent, has, editable)
		}
	}

	view := e.openEdit(nurseJo, id)
	meta := view["private_metadata"].(string)
	labels, initial := inputs(view)
	if view["callback_id"] != callbackEdit || !strings.HasPrefix(meta, strconv.FormatUint(id, 10)+"|"+chOps+"|") ||
		labels["edit_0"] != "db_name" || initial["edit_0"] != "orders_prod" || labels["edit_1"] != "keep_days" || initial["edit_1"] != "30" ||
		labels[noteBlock] == "" || len(labels) != 3 {
		t.Fatalf("edit modal: meta %q labels %v initial %v, want db_name orders_prod, keep_days 30 and a note", meta, labels, initial)
	}
	if st := e.state(id); st.Status != "pending" {
		t.Fatalf("after opening the edit form: %+v, want pending", st)
	}

	// A number that is not one: the form says so on that input; nothing sent.
	errs := e.formErrors(editPayload(nurseJo, meta, map[string]string{"edit_0": "orders_prod", "edit_1": "thirty"}, "", newTrigger()))
	if !strings.Contains(errs["edit_1"], "must be a number") {
		t.Fatalf("form errors %v, want edit_1 saying must be a number", errs)
	}
	// The tool refuses the edit (its schema): the error lands on db_name.
	errs = e.formErrors(editPayload(nurseJo, meta, map[string]string{"edit_0": "Orders!", "edit_1": "7"}, "", newTrigger()))
	if !strings.Contains(errs["edit_0"], "lowercase letters") {
		t.Fatalf("form errors %v, want edit_0 saying lowercase letters", errs)
	}
	if st := e.state(id); st.Status != "pending" || st.Decisions != 0 || st.EditedBy != "" {
		t.Fatalf("after an invalid edit: %+v, want pending, no decision, not edited", st)
	}
	for _, en := range e.audit() {
		if en.Action == "test_decide" {
			t.Fatalf("an invalid edit was audited as a decision (%+v), want no decision entry", en)
		}
	}

	// Someone who is not mapped: refused in the form, audited, nothing recorded.
	if code, body := e.interact(editPayload(stranger, meta, map[string]string{"edit_0": "orders_staging", "edit_1": "7"}, "", newTrigger())); code != http.StatusOK || body != "" {
		t.Fatalf("stranger's edit answered %d %q, want the form closed and a private answer", code, body)
	}
	if eph := e.ephemerals(stranger); len(eph) != 1 || !strings.Contains(eph[0].Form.Get("text"), "not mapped") {
		t.Fatalf("stranger's edit answered privately with %+v, want one answer saying not mapped", eph)
	}
	if d := e.denials(); len(d) != 1 || !strings.Contains(d[0].Detail, stranger) {
		t.Fatalf("stranger's edit audited as %+v, want one denial naming %s", d, stranger)
	}

	// A valid edit approves the edited arguments and closes the form; the
	// same delivery replayed is applied once.
	sub := editPayload(nurseJo, meta, map[string]string{"edit_0": "orders_staging", "edit_1": "7"}, "prod is frozen <!channel>", newTrigger())
	for range 2 {
		if code, body := e.interact(sub); code != http.StatusOK || body != "" {
			t.Fatalf("valid edit answered %d %q, want an empty 200 (closes the form)", code, body)
		}
	}
	st := e.state(id)
	if st.Status != "approved" || st.Decisions != 1 || st.EditedBy != "nurse_jo [U0456DEF]" ||
		string(st.Arguments) != `{"db_name":"orders_staging","keep_days":7}` || string(st.ProposedArgs) != `{"db_name":"orders_prod","keep_days":30}` {
		t.Fatalf("after the edit: %+v (args %s, proposed %s), want approved once by nurse_jo with the edited arguments and the proposed ones kept", st, st.Arguments, st.ProposedArgs)
	}
	e.drain()
	u := e.fake.Calls("chat.update")
	if len(u) != 1 || len(buttons(t, u[0])) != 0 ||
		!strings.Contains(blockJSON(u[0]), "Approved with changes by nurse_jo [U0456DEF]: db_name orders_prod → orders_staging; keep_days 30 → 7") {
		t.Fatalf("card after the edit: %s, want no buttons and the changes by nurse_jo", blockJSON(u[0]))
	}
}

// formErrors submits a form and decodes the errors acknowledgement.
func (e *env) formErrors(payload map[string]any) map[string]string {
	e.t.Helper()
	code, body := e.interact(payload)
	return viewErrors(e.t, code, body)
}

func TestEditMemoryValueAndStaleFormInSlack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mem := memoryTestItem()
	mem.Value = "apixaban 5mg twice daily"
	id := e.create(bot.KindMemoryChange, "default", mem)
	e.drain()
	view := e.openEdit(drSmith, id)
	labels, initial := inputs(view)
	if labels["edit_0"] != "Value" || initial["edit_0"] != "apixaban 5mg twice daily" {
		t.Fatalf("memory edit modal: labels %v initial %v, want Value apixaban 5mg twice daily", labels, initial)
	}
	meta := view["private_metadata"].(string)
	// A form whose basis is not the item's now (someone edited it since):
	// refused, nothing recorded.
	stale := meta[:strings.LastIndex(meta, "|")+1] + "00000000"
	errs := e.formErrors(editPayload(drSmith, stale, map[string]string{"edit_0": "apixaban 2.5mg twice daily"}, "", newTrigger()))
	if !strings.Contains(errs["edit_0"], "changed after you opened") {
		t.Fatalf("stale form answered %v, want edit_0 saying changed after you opened", errs)
	}
	if st := e.state(id); st.Status != "pending" {
		t.Fatalf("after a stale form: %+v, want pending", st)
	}
	if code, body := e.interact(editPayload(drSmith, meta, map[string]string{"edit_0": "apixaban 2.5mg twice daily"}, "", newTrigger())); code != http.StatusOK || body != "" {
		t.Fatalf("valid value edit answered %d %q, want an empty 200", code, body)
	}
	if st := e.state(id); st.Status != "approved" || st.Value != "apixaban 2.5mg twice daily" || st.ProposedValue != "apixaban 5mg twice daily" {
		t.Fatalf("after the value edit: %+v, want approved with the edited value and the proposed one kept", st)
	}
}

// TestEditFormOnlyForDeciders: the edit form shows everything up for
// approval, so it opens only for someone who may decide the item: a viewer
// is refused privately and audited, and opening a sensitive item's form is
// audited as a view of its details.
func TestEditFormOnlyForDeciders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	it := editableAction()
	it.Sensitive = true
	id := e.create(bot.KindAction, "ops", it)
	e.drain()
	if code, _ := e.interact(clickPayload(viewerVic, actionEdit, strconv.FormatUint(id, 10), e.ref(id), newTrigger())); code != http.StatusOK {
		t.Fatal(code)
	}
	e.barrier()
	if n := len(e.fake.Calls("views.open")); n != 0 {
		t.Fatalf("%d views.open for a viewer, want 0 (no edit form)", n)
	}
	if eph := e.ephemerals(viewerVic); len(eph) != 1 || !strings.Contains(eph[0].Form.Get("text"), "Access denied") {
		t.Fatalf("viewer answered %+v, want one private answer saying Access denied", eph)
	}
	if d := e.denials(); len(d) != 1 || !strings.Contains(d[0].Detail, "edit #") {
		t.Fatalf("viewer's attempt audited as %+v, want one denial of edit #", d)
	}
	e.openEdit(nurseJo, id)
	var views int
	for _, en := range e.audit() {
		if en.Action == "view_sensitive" && strings.Contains(en.Detail, "edit form") {
			views++
		}
	}
	if views != 1 {
		t.Fatalf("opening a sensitive item's edit form audited %d times, want 1", views)
	}
}
