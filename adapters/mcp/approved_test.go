package mcp

import (
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/bot"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApprovedArgumentsMustHashToTheApproval: the gateway forwards only
// bytes that hash to the approval's approved_args_sha256, whatever the
// redeem answer says beside it.
func TestApprovedArgumentsMustHashToTheApproval(t *testing.T) {
	t.Parallel()
	const tool = "fs__write_file"
	hash := func(args string) string {
		h, err := bot.ArgsHash(tool, []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	proposed := `{"path":"/srv/a","content":"replicas: 3"}`
	edited := `{"path":"/srv/a","content":"replicas: 2"}`
	redeemed := func(data map[string]any) outcome {
		raw, _ := json.Marshal(data)
		return outcome{res: &sdk.CallToolResult{StructuredContent: json.RawMessage(raw)}, data: data}
	}
	tests := []struct {
		name string
		red  outcome
		want string // the bytes forwarded; "" for a refusal
	}{
		{"the edited arguments, as approved", redeemed(map[string]any{"approved_args_sha256": hash(edited), "args_sha256": hash(proposed), "edited": true, "approved_arguments": json.RawMessage(edited)}), edited},
		{"approved arguments that are not what the hash names", redeemed(map[string]any{"approved_args_sha256": hash(proposed), "args_sha256": hash(proposed), "approved_arguments": json.RawMessage(edited)}), ""},
		{"a hash of another tool", redeemed(map[string]any{"approved_args_sha256": hash(proposed) + "0", "approved_arguments": json.RawMessage(proposed)}), ""},
		{"withheld, unedited: the call's own arguments", redeemed(map[string]any{"approved_args_sha256": hash(proposed), "args_sha256": hash(proposed)}), proposed},
		{"withheld, and the hash is not the call's", redeemed(map[string]any{"approved_args_sha256": hash(edited), "args_sha256": hash(edited)}), ""},
		{"withheld and edited", redeemed(map[string]any{"approved_args_sha256": hash(proposed), "args_sha256": hash(proposed), "edited": true}), ""},
		{"no approved hash", redeemed(map[string]any{"approved_arguments": json.RawMessage(proposed)}), ""},
		{"not an object", redeemed(map[string]any{"approved_args_sha256": hash(`[1]`), "approved_arguments": json.RawMessage(`[1]`)}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := approvedArguments(tool, tt.red, json.RawMessage(proposed))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("forwarded %s, want a refusal", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("approvedArguments = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}
