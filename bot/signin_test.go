package bot

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/policy"
)

// TestSignInRefusal: only a person whose role is not agent, and who is not
// revoked, signs in to the console.
func TestSignInRefusal(t *testing.T) {
	tests := []struct {
		name string
		p    Principal
		want string // in the refusal; "" signs in
	}{
		{"a member", Principal{Name: "dr_smith", Kind: "person", Role: policy.RoleMember}, ""},
		{"an admin", Principal{Name: "boss", Kind: "person", Role: policy.RoleAdmin}, ""},
		{"a viewer", Principal{Name: "v", Kind: "person", Role: policy.RoleViewer}, ""},
		{"a person with role agent", Principal{Name: "ci_bot", Kind: "person", Role: policy.RoleAgent}, "has the role agent"},
		{"an agent with role member", Principal{Name: "intake", Kind: "agent", Role: policy.RoleMember}, "is an agent principal"},
		{"a service", Principal{Name: "ops", Kind: "service", Role: policy.RoleAdmin}, "is a service principal"},
		{"a revoked person", Principal{Name: "gone", Kind: "person", Role: policy.RoleMember, Revoked: true}, "revoked"},
	}
	for _, tc := range tests {
		got := SignInRefusal(tc.p)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: SignInRefusal = %q, want %q", tc.name, got, tc.want)
		}
	}
}
