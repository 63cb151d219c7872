package mcp

import (
	"encoding/json"
	"testing"
	"time"
)

func TestCapWaitCutsOnlyALongerValidWait(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit time.Duration
		want  any // wait_seconds after, or nil when args pass unchanged
	}{
		{`{"request_id":"req_1","wait_seconds":60}`, 45 * time.Second, 45.0},
		{`{"request_id":"req_1","wait_seconds":50}`, 45 * time.Second, 45.0},
		{`{"request_id":"req_1","wait_seconds":30}`, 45 * time.Second, 30.0},
		{`{"request_id":"req_1","wait_seconds":60}`, 1500 * time.Millisecond, 1.0},
		{`{"request_id":"req_1","wait_seconds":61}`, 45 * time.Second, 61.0}, // refused by the tool, by name
		{`{"request_id":"req_1","wait_seconds":60}`, 0, 60.0},                // no limit
		{`{"request_id":"req_1"}`, 45 * time.Second, nil},
	} {
		out := capWait([]byte(c.in), c.limit)
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := m["wait_seconds"]; got != c.want || m["request_id"] != "req_1" {
			t.Errorf("%s limit %s: wait_seconds %v, want %v (%s)", c.in, c.limit, got, c.want, out)
		}
	}
	for _, bad := range []string{``, `[1]`, `{"wait_seconds":"soon"}`} {
		if got := string(capWait([]byte(bad), 45*time.Second)); got != bad {
			t.Errorf("capWait(%q) = %q, want it unchanged", bad, got)
		}
	}
}
