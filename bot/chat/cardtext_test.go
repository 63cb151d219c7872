package chat

import "testing"

func TestCardText(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		keys      []string
		text      string
		truncated bool
	}{
		{"nested in document order", `{"blocks":[{"text":{"text":"one"}},{"elements":[{"text":"two","title":"t"}]}]}`, []string{"text"}, "one\ntwo", false},
		{"several keys", `{"body":[{"text":"a"}],"actions":[{"title":"Approve","data":{"text":"data text"}}]}`, []string{"text", "title"}, "a\nApprove\ndata text", false},
		{"a key's non-string value is passed over", `{"text":{"type":"mrkdwn"},"title":3}`, []string{"text", "title"}, "", false},
		{"a cut", `{"text":"abc…(truncated)"}`, []string{"text"}, "abc…(truncated)", true},
		{"a count of what is not shown", `{"text":"…(truncated: 3 more fields are not shown)"}`, []string{"text"}, "…(truncated: 3 more fields are not shown)", true},
		{"other keys are not text", `{"value":"…(truncated)","text":"x"}`, []string{"text"}, "x", false},
		{"malformed JSON keeps what was read", `{"text":"x","more":[`, []string{"text"}, "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, truncated := CardText([]byte(tt.raw), tt.keys...)
			if text != tt.text || truncated != tt.truncated {
				t.Errorf("CardText(%s) = %q, %v; want %q, %v", tt.raw, text, truncated, tt.text, tt.truncated)
			}
		})
	}
}
