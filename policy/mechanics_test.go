package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestMechanicsFor(t *testing.T) {
	tests := []struct {
		cat  Category
		want Mechanics
	}{
		{CategoryReadOnly, MechanicsAuto},
		{CategoryMutating, MechanicsConfirm},
		{CategoryDestructive, MechanicsDryRunConfirm},
		{CategoryUnclassified, MechanicsConfirm},
		{"", MechanicsConfirm},
		{"risky", MechanicsConfirm},
	}
	for _, tt := range tests {
		if got := MechanicsFor(tt.cat); got != tt.want {
			t.Errorf("MechanicsFor(%q) = %q, want %q", tt.cat, got, tt.want)
		}
	}
}

func TestParseCategory(t *testing.T) {
	tests := []struct {
		in      string
		want    Category
		wantErr bool
	}{
		{"read-only", CategoryReadOnly, false},
		{"Mutating", CategoryMutating, false},
		{" destructive ", CategoryDestructive, false},
		{"", CategoryUnclassified, false},
		{"readonly", "", true},
		{"safe", "", true},
	}
	for _, tt := range tests {
		got, err := ParseCategory(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseCategory(%q) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestToolCategory(t *testing.T) {
	tests := []struct {
		name       string
		declared   bool
		configured Category
		prefixes   bool
		want       Category
	}{
		{"read_logs", true, CategoryReadOnly, false, CategoryReadOnly},
		{"restart_service", true, CategoryMutating, false, CategoryMutating},
		{"delete_database", true, CategoryDestructive, false, CategoryDestructive},
		{"declared_without_category", true, CategoryUnclassified, true, CategoryUnclassified},
		{"get_weather", false, "", false, CategoryUnclassified},
		{"get_weather", false, "", true, CategoryReadOnly},
		{"fetch_page", false, "", true, CategoryReadOnly},
		{"list_pods", false, "", true, CategoryReadOnly},
		{"search_docs", false, "", true, CategoryReadOnly},
		{"find_user", false, "", true, CategoryReadOnly},
		{"read_file", false, "", true, CategoryReadOnly},
		{"getaway", false, "", true, CategoryUnclassified},
		{"delete_get_x", false, "", true, CategoryUnclassified},
		// A declared tool keeps its category even when its name looks read-only.
		{"get_and_delete", true, CategoryDestructive, true, CategoryDestructive},
		// The agent cannot make an undeclared tool read-only by what it says.
		{"drop_table", false, "", true, CategoryUnclassified},
	}
	for _, tt := range tests {
		if got := ToolCategory(tt.name, tt.declared, tt.configured, tt.prefixes); got != tt.want {
			t.Errorf("ToolCategory(%q, declared=%v, %q, prefixes=%v) = %q, want %q", tt.name, tt.declared, tt.configured, tt.prefixes, got, tt.want)
		}
	}
}

func TestHeadlessDenial(t *testing.T) {
	tests := map[Category]string{
		CategoryDestructive:  "denied by automatic policy: destructive action requires explicit human confirmation",
		CategoryMutating:     "denied by automatic policy: mutating action requires explicit human confirmation",
		CategoryUnclassified: "denied by automatic policy: unclassified action requires explicit human confirmation",
	}
	for c, want := range tests {
		if got := HeadlessDenial(c); got != want {
			t.Errorf("HeadlessDenial(%q) = %q, want %q", c, got, want)
		}
	}
}

func kubectlRules(t testing.TB) []CommandRule {
	t.Helper()
	var rules []CommandRule
	for _, d := range []struct{ cmd, cat string }{
		{"kubectl get", "read-only"},
		{"kubectl describe", "read-only"},
		{"kubectl rollout restart", "mutating"},
		{"kubectl delete", "destructive"},
		{"systemctl status", "read-only"},
		{"git", "read-only"},
		{"git push", "mutating"},
		{"git push --force", "destructive"},
	} {
		r, err := ParseCommandRule(d.cmd, d.cat)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	return rules
}

func TestMatchCommand(t *testing.T) {
	rules := kubectlRules(t)
	tests := []struct {
		cmd      any
		ok       bool
		rule     string
		category Category
	}{
		{"kubectl get pods", true, "kubectl get", CategoryReadOnly},
		{[]any{"kubectl", "get", "pods", "-o", "json"}, true, "kubectl get", CategoryReadOnly},
		{"kubectl describe pod web-1", true, "kubectl describe", CategoryReadOnly},
		{"kubectl rollout restart deploy/web", true, "kubectl rollout restart", CategoryMutating},
		{"kubectl delete pod web-1", true, "kubectl delete", CategoryDestructive},
		{"  kubectl\tdelete   ns prod ", true, "kubectl delete", CategoryDestructive},
		{"systemctl status nginx", true, "systemctl status", CategoryReadOnly},
		// Longest match wins.
		{"git log", true, "git", CategoryReadOnly},
		{"git push origin main", true, "git push", CategoryMutating},
		{"git push --force origin main", true, "git push --force", CategoryDestructive},
		// A flag before the subcommand cannot downgrade it.
		{"git -C /repo push origin", true, "git", CategoryMutating},
		{"git push origin main --force", true, "git push", CategoryDestructive},
		// Not on the allowlist: refused.
		{"rm -rf /", false, "", ""},
		{"kubectl", false, "", ""},
		{"kubectl apply -f x.yaml", false, "", ""},
		{"kubectl -n prod delete pod x", false, "", ""},
		{"/usr/bin/kubectl get pods", false, "", ""},
		{"kubectlget pods", false, "", ""},
		{"KUBECTL get pods", false, "", ""},
		{"systemctl restart nginx", false, "", ""},
		{"sh -c kubectl", false, "", ""},
		{[]any{"kubectl get", "pods"}, false, "", ""},
		{"FOO=1 kubectl delete pod x", false, "", ""},
	}
	for _, tt := range tests {
		toks, err := CommandTokens(tt.cmd)
		if err != nil {
			t.Fatalf("CommandTokens(%q): %v", tt.cmd, err)
		}
		m, ok := MatchCommand(rules, toks)
		if ok != tt.ok {
			t.Errorf("MatchCommand(%q) ok = %v, want %v", tt.cmd, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		if m.Rule.String() != tt.rule || m.Category != tt.category {
			t.Errorf("MatchCommand(%q) = %q %q, want %q %q", tt.cmd, m.Rule, m.Category, tt.rule, tt.category)
		}
	}
}

func TestCommandTokensRefusesShellAndBadShapes(t *testing.T) {
	tests := []struct {
		cmd       any
		noCommand bool
	}{
		{"kubectl get pods; rm -rf /", false},
		{"kubectl get pods && rm -rf /", false},
		{"kubectl get pods | sh", false},
		{"kubectl get $(rm -rf /)", false},
		{"kubectl get `id`", false},
		{"kubectl 'delete' pod x", false},
		{"kubectl \"delete\" pod x", false},
		{"kubectl de\\lete pod x", false},
		{"kubectl get pods > /etc/passwd", false},
		{"kubectl get pods\nrm -rf /", false},
		{42.0, false},
		{map[string]any{"bin": "kubectl"}, false},
		{[]any{"kubectl", 3.0}, false},
		{nil, true},
		{"", true},
		{"   ", true},
		{[]any{}, true},
		{[]any{" "}, true},
	}
	for _, tt := range tests {
		_, err := CommandTokens(tt.cmd)
		if err == nil {
			t.Errorf("CommandTokens(%#v) = nil error, want a refusal", tt.cmd)
			continue
		}
		if got := errors.Is(err, ErrNoCommand); got != tt.noCommand {
			t.Errorf("CommandTokens(%#v) = %v; no-command = %v, want %v", tt.cmd, err, got, tt.noCommand)
		}
	}
}

func TestParseCommandRule(t *testing.T) {
	for _, bad := range []struct{ cmd, cat string }{
		{"", "read-only"},
		{"   ", "read-only"},
		{"kubectl get", ""},
		{"kubectl get", "safe"},
		{"kubectl get; rm", "read-only"},
	} {
		if _, err := ParseCommandRule(bad.cmd, bad.cat); err == nil {
			t.Errorf("ParseCommandRule(%q, %q) = nil error, want one", bad.cmd, bad.cat)
		}
	}
	r, err := ParseCommandRule("  kubectl   rollout restart ", "Mutating")
	if err != nil || !slices.Equal(r.Tokens, []string{"kubectl", "rollout", "restart"}) || r.Category != CategoryMutating {
		t.Fatalf("ParseCommandRule = %+v, %v", r, err)
	}
}

func TestRequiredMissing(t *testing.T) {
	args := map[string]any{"region": "eu-west-1", "size": "", "zone": nil, "count": 0.0, "tags": []any{}}
	got := RequiredMissing([]string{"size", "region", "image", "zone", "count", "tags"}, args)
	want := []string{"size", "image", "zone"}
	if !slices.Equal(got, want) {
		t.Fatalf("RequiredMissing = %v, want %v (schema order)", got, want)
	}
	if got := Clarification([]string{"region", "size"}); got != "REQUIRES_CLARIFICATION: Missing required parameters: region, size" {
		t.Fatalf("Clarification = %q", got)
	}
}

// FuzzMatchCommand checks the allowlist on arbitrary commands: it never
// panics; a string with a shell character is never matched; a match is a
// whole-token prefix of the command; the verdict is never less strict than
// the matched rule nor than a longer rule whose words the command carries.
func FuzzMatchCommand(f *testing.F) {
	for _, s := range []string{"kubectl get pods", "kubectl delete pod x", "git -C x push --force", "rm -rf /", "kubectl get;rm", "", "git push\t--force", "kubectl  rollout  restart"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	rules := kubectlRules(f)
	f.Fuzz(func(t *testing.T, s string, asArgv bool) {
		var in any = s
		if asArgv {
			in = toAny(strings.Split(s, " "))
		}
		toks, err := CommandTokens(in)
		if err != nil {
			return
		}
		if !asArgv && strings.ContainsAny(s, shellOperators) {
			t.Fatalf("CommandTokens(%q) accepted a shell character", s)
		}
		m, ok := MatchCommand(rules, toks)
		if !ok {
			for _, r := range rules {
				if len(r.Tokens) <= len(toks) && slices.Equal(r.Tokens, toks[:len(r.Tokens)]) {
					t.Fatalf("%q starts with rule %q but was refused", s, r)
				}
			}
			return
		}
		n := len(m.Rule.Tokens)
		if n > len(toks) || !slices.Equal(m.Rule.Tokens, toks[:n]) {
			t.Fatalf("rule %q is not a token prefix of %q", m.Rule, toks)
		}
		if severity(m.Category) < severity(m.Rule.Category) {
			t.Fatalf("%q: category %q is weaker than its rule's %q", s, m.Category, m.Rule.Category)
		}
		for _, r := range rules {
			if len(r.Tokens) > n && slices.Equal(r.Tokens[:n], m.Rule.Tokens) && isSubsequence(r.Tokens[n:], toks[n:]) && severity(m.Category) < severity(r.Category) {
				t.Fatalf("%q: category %q is weaker than the extending rule %q (%q)", s, m.Category, r, r.Category)
			}
			if len(r.Tokens) > n && len(r.Tokens) <= len(toks) && slices.Equal(r.Tokens, toks[:len(r.Tokens)]) {
				t.Fatalf("%q: rule %q is longer than the chosen %q", s, r, m.Rule)
			}
		}
	})
}
