package memorytools

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
)

// confirm_change with a value approves a proposal with changes: the edited
// value is checked like any value of the slot, becomes current, and the
// proposal keeps both values with their hashes; the audit names both.
func TestConfirmEditedValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.seed() // #2 REPLACE warfarin -> apixaban 5mg twice daily; #3 REMOVE warfarin
	f.text(f.fhir, "remember", arg("subject", "code_status", "value", "Full code", "source", "fhir"), "Stored: [ADD] code_status = Full code")
	f.text(f.agent, "remember", arg("subject", "code_status", "value", "DNR"), "Stored: [FLAG] code_status = DNR") // #5
	refusals := []struct {
		name  string
		id    int
		value string
		want  string
	}{
		{"a removal has no value", 3, "anything", "no value to edit"},
		{"another item of a list slot", 2, "rivaroxaban 20mg daily", "not which item it is"},
		{"the value it replaces", 5, "full  code", "is the current value of code_status"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			be := f.fail(f.member, "confirm_change", arg("memory_id", tt.id, "value", tt.value), bot.KindInvalid)
			if be.Field != "value" || !strings.Contains(be.Msg, tt.want) {
				t.Fatalf("got %v (field %q), want a 400 on value saying %q", be, be.Field, tt.want)
			}
		})
	}
	if be := f.fail(f.member, "confirm_change", arg("memory_id", 2, "value", "  "), bot.KindInvalid); be.Field != "value" {
		t.Fatalf("empty value: %v (field %q), want a refusal on %q", be, be.Field, "value")
	}
	// reject_change takes no value.
	f.fail(f.member, "reject_change", arg("memory_id", 2, "value", "x"), bot.KindInvalid)
	// The proposer cannot approve its own proposal, with changes or not.
	f.fail(f.agent, "confirm_change", arg("memory_id", 2, "value", "apixaban 2.5mg twice daily"), bot.KindDenied)
	// Nothing was recorded: both proposals still wait.
	if n := len(f.ok(f.agent, "pending_changes", arg()).Data.(map[string]any)["changes"].([]pendingData)); n != 3 {
		t.Fatalf("%d proposals pending after refused edits, want 3", n)
	}

	r := f.ok(f.member, "confirm_change", arg("memory_id", 2, "value", "apixaban 2.5mg twice daily", "reason", "renal function"))
	d := r.Data.(decisionData)
	if d.Value != "apixaban 2.5mg twice daily" || !d.Edited || d.ProposedValue != "apixaban 5mg twice daily" ||
		d.ProposedSHA256 != memory.ValueSHA256("apixaban 5mg twice daily") || d.ApprovedSHA256 != memory.ValueSHA256("apixaban 2.5mg twice daily") ||
		d.EditedBy != "dr_smith [prin_member]" {
		t.Fatalf("decision: %+v; want value %q edited by %q from %q, with both hashes", d, "apixaban 2.5mg twice daily", "dr_smith [prin_member]", "apixaban 5mg twice daily")
	}
	if r.Text != "Approved #2 with changes: SUPERSEDE active_medication = apixaban 2.5mg twice daily (proposed: apixaban 5mg twice daily)" {
		t.Fatalf("text: %q, want %q", r.Text, "Approved #2 with changes: SUPERSEDE active_medication = apixaban 2.5mg twice daily (proposed: apixaban 5mg twice daily)")
	}
	// The approved value is current; the proposed one never was.
	rec := f.ok(f.agent, "recall", arg("question", "which anticoagulant and dose?"))
	if !strings.Contains(rec.Text, "apixaban 2.5mg twice daily") || strings.Contains(rec.Text, "apixaban 5mg") {
		t.Fatalf("recall: %s\nwant %q in it and no %q", rec.Text, "apixaban 2.5mg twice daily", "apixaban 5mg")
	}
	// The audit entry names both values' hashes and the editor.
	var found bool
	for _, e := range f.audit() {
		if e.Action == "confirm_change" {
			found = strings.Contains(e.Detail, "with changes by dr_smith [prin_member]") &&
				strings.Contains(e.Detail, memory.ValueSHA256("apixaban 5mg twice daily")) && strings.Contains(e.Detail, memory.ValueSHA256("apixaban 2.5mg twice daily"))
			if !found {
				t.Fatalf("audit: %q, want it to name %q and both values' hashes", e.Detail, "with changes by dr_smith [prin_member]")
			}
		}
	}
	if !found {
		t.Fatal("no confirm_change entry")
	}
}

// Through the item (the chat and console path) an edit is the same
// confirm_change; the item shows it approved with changes.
func TestConfirmEditThroughItem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.text(f.fhir, "remember", arg("subject", "code_status", "value", "Full code", "source", "fhir"), "Stored: [ADD] code_status = Full code")
	f.text(f.agent, "remember", arg("subject", "code_status", "value", "DNR"), "Stored: [FLAG] code_status = DNR")
	pc := f.ok(f.agent, "pending_changes", arg()).Data.(map[string]any)["changes"].([]pendingData)
	it, err := f.b.Items().Get(context.Background(), pc[0].ItemID)
	if err != nil || it.Editable == nil || it.Editable.Kind != bot.EditValue || string(it.Editable.Current) != `"DNR"` {
		t.Fatalf("editable: %+v %v; want a value edit of %s", it.Editable, err, `"DNR"`)
	}
	res, err := f.b.EditItem(context.Background(), f.member, it.ID, []byte(`"DNR / DNI"`), "")
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Data.(decisionData); d.Value != "DNR / DNI" || !d.Edited {
		t.Fatalf("edit through the item: %+v, want value %q, edited", d, "DNR / DNI")
	}
	it, _ = f.b.Items().Get(context.Background(), it.ID)
	if it.Status != "approved" || it.Editable != nil || it.Changes == nil || it.Changes.Text() != "code_status DNR → DNR / DNI" || it.Changes.By != "dr_smith [prin_member]" {
		t.Fatalf("item: %+v %+v; want approved, not editable, changes %q by %q", it, it.Changes, "code_status DNR → DNR / DNI", "dr_smith [prin_member]")
	}
	if rec := f.ok(f.agent, "recall", arg("question", "code status?")); !strings.Contains(rec.Text, "DNR / DNI") {
		t.Fatalf("recall: %s\nwant %q in it", rec.Text, "DNR / DNI")
	}
}

// A value equal to the proposal (as the slot stores it) is no edit.
func TestConfirmSameValueIsNoEdit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memory.Options{})
	f.text(f.fhir, "remember", arg("subject", "code_status", "value", "Full code", "source", "fhir"), "Stored: [ADD] code_status = Full code")
	f.text(f.agent, "remember", arg("subject", "code_status", "value", "DNR"), "Stored: [FLAG] code_status = DNR")
	d := f.ok(f.member, "confirm_change", arg("memory_id", 2, "value", "  DNR ")).Data.(decisionData)
	if d.Edited || d.Value != "DNR" || d.ProposedValue != "" {
		t.Fatalf("same value: %+v; want value %q, not edited, no proposed value", d, "DNR")
	}
}
