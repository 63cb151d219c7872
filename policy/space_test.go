package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestSpaceCheck(t *testing.T) {
	tests := []struct {
		sp             Space
		field, problem string // "" when valid
	}{
		{Space{UserID: "patient_42"}, "", ""},
		{Space{UserID: "u", AgentID: "a", RunID: "r"}, "", ""},
		{Space{}, "user_id", "required"},
		{Space{}.Normalized(), "", ""},
		{Space{UserID: strings.Repeat("x", 129)}, "user_id", "must be at most 128 bytes"},
		{Space{UserID: "u", AgentID: "a\x00b"}, "agent_id", "must not contain control characters"},
		{Space{UserID: "u", RunID: "r\x7f"}, "run_id", "must not contain control characters"},
	}
	for _, tt := range tests {
		err := tt.sp.Check()
		var se *SpaceError
		if tt.field == "" {
			if err != nil {
				t.Errorf("%+v: %v, want valid", tt.sp, err)
			}
			continue
		}
		if !errors.As(err, &se) || se.Field != tt.field || se.Problem != tt.problem {
			t.Errorf("%+v: %v, want %s: %s", tt.sp, err, tt.field, tt.problem)
		}
	}
}

// TestSpaceDecodesEveryOldForm: the three space types this one replaced
// stored the same names, with and without empty parts; all decode alike.
func TestSpaceDecodesEveryOldForm(t *testing.T) {
	want := Space{UserID: "u", AgentID: "a"}
	for _, old := range []string{
		`{"user_id":"u","agent_id":"a","run_id":""}`, // memory.Space
		`{"user_id":"u","agent_id":"a"}`,             // approvals.SpaceRef, bot.Space
	} {
		var got Space
		if err := json.Unmarshal([]byte(old), &got); err != nil || got != want {
			t.Errorf("%s decodes as %+v (%v), want %+v", old, got, err, want)
		}
	}
	if b, _ := json.Marshal(want); string(b) != `{"user_id":"u","agent_id":"a"}` {
		t.Errorf("encodes as %s, want %s", b, `{"user_id":"u","agent_id":"a"}`)
	}
}

// TestSpaceLabel: the one label every surface shows for a space.
func TestSpaceLabel(t *testing.T) {
	for _, tt := range []struct {
		sp   Space
		want string
	}{
		{Space{UserID: "patient_42"}, "patient_42"},
		{Space{UserID: "patient_42", AgentID: "ward"}, "patient_42 · agent ward"},
		{Space{UserID: "patient_42", AgentID: "ward", RunID: "r7"}, "patient_42 · agent ward · run r7"},
		{Space{UserID: "patient_42", RunID: "r7"}, "patient_42 · run r7"},
	} {
		if got := tt.sp.Label(); got != tt.want {
			t.Errorf("%#v.Label() = %q, want %q", tt.sp, got, tt.want)
		}
	}
}
