package main

import (
	"strings"
	"testing"
)

// TestPendingActionsTool: pending_actions over the real server lists the
// action requests awaiting a decision in the caller's scope only, soonest
// to expire first with the destructive one flagged, and pages with its
// cursor through every one exactly once; a bad cursor or limit is a 400
// naming the argument.
func TestPendingActionsTool(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `
tools:
  - name: restart_service
    category: mutating
    timeout: 6h
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    timeout: 30m
`)
	agent := e.CreateKey("ops_bot", "agent")
	nurse := e.CreateKey("nurse_a", "member", "--scopes", "ward_a")
	admin := e.CreateKey("boss", "admin")
	e.Start()
	ask := func(space, tool string, args map[string]any, summary string) string {
		r := e.MustOK(agent, "confirm_action", map[string]any{"user_id": space, "tool": tool, "arguments": args, "summary": summary, "dry_run": "plan"})
		id, _ := r.Data["request_id"].(string)
		if r.Data["status"] != "pending" || id == "" {
			t.Fatalf("confirm_action in %s: %s, want status pending with a request_id", space, r)
		}
		return id
	}
	restartA := ask("ward_a", "restart_service", map[string]any{"service": "pumps"}, "Restart the infusion pump service")
	dropA := ask("ward_a", "delete_database", map[string]any{"db_name": "ward_a_tmp"}, "Drop the scratch database")
	restartB := ask("ward_b", "restart_service", map[string]any{"service": "lab"}, "Restart the lab feed")
	e.MustOK(agent, "remember", map[string]any{"user_id": "ward_a", "subject": "note", "value": "v", "text": "t"}) // not an action: never listed

	list := func(key string, args map[string]any) ([]map[string]any, string, toolResponse) {
		t.Helper()
		r := e.MustOK(key, "pending_actions", args)
		raw, _ := r.Data["requests"].([]any)
		var out []map[string]any
		for _, x := range raw {
			out = append(out, x.(map[string]any))
		}
		next, _ := r.Data["next_cursor"].(string)
		return out, next, r
	}
	ids := func(rs []map[string]any) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r["request_id"].(string))
		}
		return out
	}

	got, next, r := list(nurse, map[string]any{})
	if want := []string{dropA, restartA}; strings.Join(ids(got), ",") != strings.Join(want, ",") || next != "" {
		t.Fatalf("nurse_a (ward_a) sees %v next %q, want %v (soonest to expire first)\n%s", ids(got), next, want, r.Text)
	}
	if got[0]["destructive"] != true || got[1]["destructive"] != false || got[0]["tool"] != "delete_database" || got[1]["summary"] != "Restart the infusion pump service" {
		t.Errorf("the rows: %v; want delete_database destructive first, then the non-destructive %q", got, "Restart the infusion pump service")
	}
	if strings.Contains(r.Raw, "ward_b") || strings.Contains(r.Raw, restartB) || !strings.Contains(r.Text, "⚠ cannot be undone: Drop the scratch database") {
		t.Errorf("nurse_a's answer:\n%s\nwant %q in the text and nothing of ward_b (%s)", r.Raw, "⚠ cannot be undone: Drop the scratch database", restartB)
	}

	all, _, _ := list(admin, map[string]any{})
	if len(all) != 3 {
		t.Fatalf("the admin sees %v, want all 3 requests", ids(all))
	}
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the pages do not end")
		}
		args := map[string]any{"limit": 1}
		if cursor != "" {
			args["cursor"] = cursor
		}
		page, next, _ := list(admin, args)
		if len(page) != 1 {
			t.Fatalf("page %d holds %d requests, want 1", pages, len(page))
		}
		paged = append(paged, ids(page)...)
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(paged, ",") != strings.Join(ids(all), ",") {
		t.Errorf("paging one at a time gave %v, want %v", paged, ids(all))
	}

	for _, tc := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"cursor": "x"}, "cursor"},
		{map[string]any{"cursor": "999999"}, "cursor"},
		{map[string]any{"limit": 0}, "limit"},
		{map[string]any{"limit": 101}, "limit"},
	} {
		if r := e.Call(nurse, "pending_actions", tc.args); r.Status != 400 || r.Field != tc.field {
			t.Errorf("pending_actions %v: %d field %q, want 400 naming %s (%s)", tc.args, r.Status, r.Field, tc.field, r.Raw)
		}
	}
}
