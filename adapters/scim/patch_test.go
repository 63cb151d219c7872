package scim

import (
	"encoding/json"
	"strings"
	"testing"

	scimlib "github.com/elimity-com/scim"
	filter "github.com/scim2/filter-parser/v2"
)

func path(t *testing.T, p string) *filter.Path {
	t.Helper()
	got, err := filter.ParsePath([]byte(p))
	if err != nil {
		t.Fatalf("path %q: %v", p, err)
	}
	return &got
}

func doc(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func val(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestApplyOp: the PATCH forms Okta and Entra send, applied to stored
// attributes; what Countersign does not apply is a 400 naming it.
func TestApplyOp(t *testing.T) {
	const user = `{"userName":"a@x","active":true,"name":{"givenName":"Min","familyName":"Kim"},"emails":[{"type":"work","value":"a@x"}]}`
	const group = `{"displayName":"g","members":[{"value":"u1"},{"value":"u2"}]}`
	tests := []struct {
		name, start, op, path, value string
		want, err                    string
	}{
		{"Okta: replace without a path", user, "replace", "", `{"active":false}`, `"active":false`, ""},
		{"no path, a dotted key", user, "replace", "", `{"name.familyName":"Lee"}`, `"familyName":"Lee","givenName":"Min"`, ""},
		{"Entra: Replace a filtered sub-attribute", user, "Replace", `emails[type eq "work"].value`, `"b@x"`, `"emails":[{"type":"work","value":"b@x"}]`, ""},
		{"a filter matching nothing adds an element", user, "add", `emails[type eq "home"].value`, `"h@x"`, `{"type":"home","value":"h@x"}`, ""},
		{"replace a sub-attribute", user, "replace", "name.familyName", `"Lee"`, `"familyName":"Lee","givenName":"Min"`, ""},
		{"remove an attribute", user, "remove", "name.givenName", ``, `"name":{"familyName":"Kim"}`, ""},
		{"Okta: remove a member by filter", group, "remove", `members[value eq "u1"]`, ``, `"members":[{"value":"u2"}]`, ""},
		{"Entra: Remove members by value", group, "Remove", "members", `[{"value":"u2"}]`, `"members":[{"value":"u1"}]`, ""},
		{"add members, once each", group, "add", "members", `[{"value":"u2"},{"value":"u3"}]`, `"members":[{"value":"u1"},{"value":"u2"},{"value":"u3"}]`, ""},
		{"Okta: replace every member", group, "replace", "members", `[{"value":"u3"}]`, `"members":[{"value":"u3"}]`, ""},
		{"no path, no object", user, "replace", "", `false`, "", "needs an object of attributes"},
		{"a filter other than eq", group, "remove", `members[value co "u"]`, ``, "", `uses a filter Countersign does not apply`},
	}
	for _, tt := range tests {
		attrs := doc(t, tt.start)
		op := scimlib.PatchOperation{Op: tt.op}
		if tt.path != "" {
			op.Path = path(t, tt.path)
		}
		if tt.value != "" {
			op.Value = val(t, tt.value)
		}
		err := applyOp(attrs, op)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		b, _ := json.Marshal(attrs)
		if err != nil || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %s (%v), want it to hold %s", tt.name, b, err, tt.want)
		}
	}
}
