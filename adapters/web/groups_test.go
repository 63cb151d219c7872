package web

import (
	"slices"
	"strings"
	"testing"
)

// TestOIDCGroups: the groups claim is read as a list of strings (or one
// string); other values, empty or over-long names and control characters
// are dropped, and at most maxClaimGroups are kept.
func TestOIDCGroups(t *testing.T) {
	many := make([]any, maxClaimGroups+5)
	for i := range many {
		many[i] = "g"
	}
	for _, tc := range []struct {
		in   any
		want []string
	}{
		{[]any{"pharmacists", "doctors"}, []string{"pharmacists", "doctors"}},
		{"pharmacists", []string{"pharmacists"}},
		{[]any{"ok", 7, "", " ", "bad\nname", strings.Repeat("x", maxClaimGroupName+1)}, []string{"ok"}},
		{map[string]any{"a": "b"}, nil},
		{nil, nil},
	} {
		if got := oidcGroups(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("oidcGroups(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := oidcGroups(many); len(got) != maxClaimGroups {
		t.Errorf("oidcGroups kept %d of %d, want %d", len(got), len(many), maxClaimGroups)
	}
}
