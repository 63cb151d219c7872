package bot

import (
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/policy"
)

// TestCheckSignIn: only a person whose role is not agent, and who is not
// revoked, signs in to the console; a refusal names its reason and the
// principal.
func TestCheckSignIn(t *testing.T) {
	tests := []struct {
		name string
		p    Principal
		want SignInBar // 0: signs in
	}{
		{"a member", Principal{Name: "dr_smith", Kind: "person", Role: policy.RoleMember}, 0},
		{"an admin", Principal{Name: "boss", Kind: "person", Role: policy.RoleAdmin}, 0},
		{"a viewer", Principal{Name: "v", Kind: "person", Role: policy.RoleViewer}, 0},
		{"a person with role agent", Principal{Name: "ci_bot", Kind: "person", Role: policy.RoleAgent}, SignInAgentRole},
		{"an agent with role member", Principal{Name: "intake", Kind: "agent", Role: policy.RoleMember}, SignInNotAPerson},
		{"a service", Principal{Name: "ops", Kind: "service", Role: policy.RoleAdmin}, SignInNotAPerson},
		{"a revoked person", Principal{Name: "gone", Kind: "person", Role: policy.RoleMember, Revoked: true}, SignInRevoked},
		{"a revoked agent", Principal{Name: "old", Kind: "agent", Role: policy.RoleAgent, Revoked: true}, SignInRevoked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := CheckSignIn(tc.p)
			if tc.want == 0 {
				if r != nil {
					t.Fatalf("CheckSignIn = %v (%s), want nil: %s signs in", r.Bar, r.Message, tc.p.Name)
				}
				return
			}
			if r == nil {
				t.Fatalf("CheckSignIn = nil, want a refusal for %v", tc.want)
			}
			var err error = r
			if !errors.Is(err, tc.want) || r.Bar != tc.want {
				t.Errorf("CheckSignIn refused for %v, want %v", r.Bar, tc.want)
			}
			if tc.want != SignInRevoked && !strings.Contains(r.Message, tc.p.Name) {
				t.Errorf("the refusal %q does not name %s", r.Message, tc.p.Name)
			}
		})
	}
}
