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
	for _, d := range []struct {
		cmd, cat string
		flags    []string
	}{
		{"kubectl get", "read-only", []string{"-n", "--namespace", "-o", "--output", "-l"}},
		{"kubectl describe", "read-only", []string{"--output=json"}},
		{"kubectl rollout restart", "mutating", nil},
		{"kubectl delete", "destructive", nil},
		{"systemctl status", "read-only", nil},
		{"git", "read-only", []string{"--oneline"}},
		{"git push", "mutating", nil},
		{"git push --force", "destructive", nil},
	} {
		r, err := ParseCommandRule(d.cmd, d.cat, d.flags)
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
		cmd        any
		ok         bool
		rule       string
		category   Category
		unaccepted string // a flag the read-only entry does not accept
	}{
		{"kubectl get pods", true, "kubectl get", CategoryReadOnly, ""},
		{[]any{"kubectl", "get", "pods", "-o", "json"}, true, "kubectl get", CategoryReadOnly, ""},
		{"kubectl describe pod web-1", true, "kubectl describe", CategoryReadOnly, ""},
		{"kubectl rollout restart deploy/web", true, "kubectl rollout restart", CategoryMutating, ""},
		{"kubectl delete pod web-1", true, "kubectl delete", CategoryDestructive, ""},
		{"  kubectl\tdelete   ns prod ", true, "kubectl delete", CategoryDestructive, ""},
		{"systemctl status nginx", true, "systemctl status", CategoryReadOnly, ""},
		// Longest match wins.
		{"git log", true, "git", CategoryReadOnly, ""},
		{"git push origin main", true, "git push", CategoryMutating, ""},
		{"git push --force origin main", true, "git push --force", CategoryDestructive, ""},
		// A flag before the subcommand cannot downgrade it.
		{"git -C /repo push origin", true, "git", CategoryMutating, ""},
		{"git push origin main --force", true, "git push", CategoryDestructive, ""},
		// Not on the allowlist: refused.
		{"rm -rf /", false, "", "", ""},
		{"kubectl", false, "", "", ""},
		{"kubectl apply -f x.yaml", false, "", "", ""},
		{"kubectl -n prod delete pod x", false, "", "", ""},
		{"/usr/bin/kubectl get pods", false, "", "", ""},
		{"kubectlget pods", false, "", "", ""},
		{"KUBECTL get pods", false, "", "", ""},
		{"systemctl restart nginx", false, "", "", ""},
		{"sh -c kubectl", false, "", "", ""},
		{[]any{"kubectl get", "pods"}, false, "", "", ""},
		{"FOO=1 kubectl delete pod x", false, "", "", ""},
		// A read-only entry takes only the flags it names; a loader flag
		// (an exec plugin in a kubeconfig, another context, server or
		// token) never.
		{"kubectl get pods -n prod -o yaml --namespace=prod --output=json", true, "kubectl get", CategoryReadOnly, ""},
		{"kubectl get pods -l app=web -", true, "kubectl get", CategoryReadOnly, ""},
		{"kubectl get pods --kubeconfig=/tmp/evil", true, "kubectl get", CategoryReadOnly, "--kubeconfig=/tmp/evil"},
		{[]any{"kubectl", "get", "pods", "--kubeconfig", "/tmp/evil"}, true, "kubectl get", CategoryReadOnly, "--kubeconfig"},
		{"kubectl get pods --context prod-admin", true, "kubectl get", CategoryReadOnly, "--context"},
		{"kubectl get pods -s https://evil.example", true, "kubectl get", CategoryReadOnly, "-s"},
		{"kubectl get pods --token=x --as=admin", true, "kubectl get", CategoryReadOnly, "--token=x"},
		{"kubectl get pods -oyaml", true, "kubectl get", CategoryReadOnly, "-oyaml"},
		{"kubectl get pods -no", true, "kubectl get", CategoryReadOnly, "-no"},
		{"kubectl get -- pods", true, "kubectl get", CategoryReadOnly, "--"},
		{"kubectl describe pod x --output=json", true, "kubectl describe", CategoryReadOnly, ""},
		{"kubectl describe pod x --output=yaml", true, "kubectl describe", CategoryReadOnly, "--output=yaml"},
		{"kubectl describe pod x --output", true, "kubectl describe", CategoryReadOnly, "--output"},
		{"systemctl status nginx --host=evil", true, "systemctl status", CategoryReadOnly, "--host=evil"},
		{"git log --oneline -c core.pager=evil", true, "git", CategoryReadOnly, "-c"},
		{"git -C /tmp/evil log", true, "git", CategoryReadOnly, "-C"},
		// Not read-only: a person sees every flag, none is refused here.
		{"kubectl delete pod x --kubeconfig=/tmp/evil", true, "kubectl delete", CategoryDestructive, ""},
		{"git -C /tmp/evil push", true, "git", CategoryMutating, ""},
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
		if m.Rule.String() != tt.rule || m.Category != tt.category || m.Unaccepted != tt.unaccepted {
			t.Errorf("MatchCommand(%q) = %q %q unaccepted %q, want %q %q unaccepted %q", tt.cmd, m.Rule, m.Category, m.Unaccepted, tt.rule, tt.category, tt.unaccepted)
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
		if _, err := ParseCommandRule(bad.cmd, bad.cat, nil); err == nil {
			t.Errorf("ParseCommandRule(%q, %q) = nil error, want one", bad.cmd, bad.cat)
		}
	}
	for _, bad := range []struct {
		cmd, cat, flag, want string
	}{
		{"kubectl get", "read-only", "--kubeconfig", "exec credential plugin"},
		{"/usr/local/bin/kubectl get", "read-only", "--context", "another context"},
		{"kubectl get", "read-only", "-s", "another API server"},
		{"kubectl get", "read-only", "--as=admin", "impersonates"},
		{"oc get", "read-only", "--token", "bearer token"},
		{"helm list", "read-only", "--kube-context", "another context"},
		{"git log", "read-only", "-c", "configuration"},
		{"git log", "read-only", "--exec-path", "another directory"},
		{"docker ps", "read-only", "-H", "another daemon"},
		{"aws s3 ls", "read-only", "--profile", "credentials"},
		{"find .", "read-only", "-exec", "runs a program"},
		{"anything", "read-only", "--config", "configuration file"},
		{"kubectl delete", "destructive", "-n", "read-only entries only"},
		{"kubectl get", "read-only", "n", "not a flag"},
		{"kubectl get", "read-only", "--", "not a flag"},
		{"kubectl get", "read-only", "-o json", "not a flag"},
		{"kubectl get", "read-only", "--output=$(id)", "not a flag"},
	} {
		_, err := ParseCommandRule(bad.cmd, bad.cat, []string{bad.flag})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseCommandRule(%q, %q, flags %q) = %v, want an error saying %q", bad.cmd, bad.cat, bad.flag, err, bad.want)
		}
	}
	if r, err := ParseCommandRule("kubectl get", "read-only", []string{" -n ", "--output=json"}); err != nil || !slices.Equal(r.Flags, []string{"-n", "--output=json"}) {
		t.Fatalf("ParseCommandRule with flags = %+v, %v, want flags %q and no error", r, err, []string{"-n", "--output=json"})
	}
	r, err := ParseCommandRule("  kubectl   rollout restart ", "Mutating", nil)
	if err != nil || !slices.Equal(r.Tokens, []string{"kubectl", "rollout", "restart"}) || r.Category != CategoryMutating {
		t.Fatalf("ParseCommandRule = %+v, %v, want tokens %q, category %s and no error", r, err, []string{"kubectl", "rollout", "restart"}, CategoryMutating)
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
		t.Fatalf("Clarification = %q, want %q", got, "REQUIRES_CLARIFICATION: Missing required parameters: region, size")
	}
}

// FuzzMatchCommand checks the allowlist on arbitrary commands: it never
// panics; a string with a shell character is never matched; a match is a
// whole-token prefix of the command; the verdict is never less strict than
// the matched rule nor than a longer rule whose words the command carries.
func FuzzMatchCommand(f *testing.F) {
	for _, s := range []string{"kubectl get pods", "kubectl delete pod x", "git -C x push --force", "rm -rf /", "kubectl get;rm", "", "git push\t--force", "kubectl  rollout  restart",
		"kubectl get pods --kubeconfig=/tmp/x", "kubectl get --kubeconfig /tmp/x pods", "kubectl get pods -oyaml", "kubectl get pods -n=prod", "git -C /tmp log", "kubectl describe pod --output=json"} {
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
		if m.Category == CategoryReadOnly && m.Unaccepted == "" {
			for _, tok := range toks[n:] {
				if isFlag(tok) && !m.Rule.acceptsFlag(tok) {
					t.Fatalf("%q: read-only with the flag %q its rule %q does not accept", s, tok, m.Rule)
				}
				if isFlag(tok) && LoaderFlag(toks[0], tok) != "" {
					t.Fatalf("%q: read-only with the loader flag %q", s, tok)
				}
			}
		}
		if m.Unaccepted != "" && (m.Category != CategoryReadOnly || !slices.Contains(toks[n:], m.Unaccepted)) {
			t.Fatalf("%q: unaccepted %q on a %s verdict", s, m.Unaccepted, m.Category)
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
