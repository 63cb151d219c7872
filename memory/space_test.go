package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/kv"
)

// TestFactInTheOldSpaceFormLoads: facts written when memory had its own
// Space type stored every part of the space, "" included
// ({"user_id":"patient_42","agent_id":"","run_id":""}); the one space type
// (policy.Space) omits empty parts. A row in the old form still loads as
// the same space, and a write over it (a supersede) retires it and stores
// its successor in the new form.
func TestFactInTheOldSpaceFormLoads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.mustWrite(Input{Subject: "primary_diagnosis", Value: "pneumonia"}, ActionAdd)
	id := p.New.ID
	var raw []byte
	ctx := context.Background()
	if err := e.db.View(ctx, func(tx kv.Tx) error {
		var err error
		raw, err = tx.Get(bucketFacts, factKey(e.sp, id))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(`"agent_id"`)) {
		t.Fatalf("a new row still stores the empty agent_id: %s, want no %q in it", raw, `"agent_id"`)
	}
	// Rewrite the row as the old Space type stored it.
	var row map[string]any
	if err := json.Unmarshal(raw, &row); err != nil {
		t.Fatal(err)
	}
	row["space"] = map[string]any{"user_id": "patient_42", "agent_id": "", "run_id": ""}
	old, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old, []byte(`"space":{"agent_id":"","run_id":"","user_id":"patient_42"}`)) {
		t.Fatalf("the test did not write the old form: %s, want it to contain %s", old, `"space":{"agent_id":"","run_id":"","user_id":"patient_42"}`)
	}
	if err := e.db.Update(ctx, func(tx kv.Tx) error { return tx.Put(bucketFacts, factKey(e.sp, id), old) }); err != nil {
		t.Fatal(err)
	}
	if f := e.load(id); f.Space != e.sp || f.Value != "pneumonia" {
		t.Fatalf("old-form row loads as space %+v value %q, want %+v pneumonia", f.Space, f.Value, e.sp)
	}
	next := e.mustWrite(Input{Subject: "primary_diagnosis", Value: "sepsis"}, ActionSupersede)
	if f := e.load(id); f.Status != StatusSuperseded || f.Space != e.sp {
		t.Fatalf("the old-form row after a supersede: %s in %+v, want %s in %+v", f.Status, f.Space, StatusSuperseded, e.sp)
	}
	if got := e.activeValues("primary_diagnosis"); len(got) != 1 || got[0] != "sepsis" || next.New == nil {
		t.Fatalf("active values %v after the supersede (new fact %v), want [sepsis] and a new fact", got, next.New)
	}
}
