package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Category is a declared tool's category. It comes from config.yaml, never
// from what an agent says about its own call.
type Category string

// The categories. CategoryUnclassified is an undeclared tool, or a declared
// one without a category: it gets a confirmation, the safe default.
const (
	CategoryReadOnly     Category = "read-only"
	CategoryMutating     Category = "mutating"
	CategoryDestructive  Category = "destructive"
	CategoryUnclassified Category = "unclassified"
)

// ParseCategory reads a configured category. The empty string is
// CategoryUnclassified; anything else unknown is an error.
func ParseCategory(s string) (Category, error) {
	switch c := Category(strings.ToLower(strings.TrimSpace(s))); c {
	case CategoryReadOnly, CategoryMutating, CategoryDestructive:
		return c, nil
	case "", CategoryUnclassified:
		return CategoryUnclassified, nil
	}
	return "", fmt.Errorf("%q is not a category; use read-only, mutating or destructive", s)
}

// severity orders categories from harmless to dangerous. Unclassified sits
// with mutating: it needs a confirmation.
func severity(c Category) int {
	switch c {
	case CategoryReadOnly:
		return 0
	case CategoryDestructive:
		return 2
	}
	return 1
}

// stricter returns the more dangerous of a and b.
func stricter(a, b Category) Category {
	if severity(b) > severity(a) {
		return b
	}
	return a
}

// Mechanics is how a call is approved.
type Mechanics string

// The mechanics: run at once, ask a person, or show a dry-run plan and ask a
// person (the approver is then recorded as confirmed_by).
const (
	MechanicsAuto          Mechanics = "auto"
	MechanicsConfirm       Mechanics = "confirm"
	MechanicsDryRunConfirm Mechanics = "dry_run_confirm"
)

// MechanicsFor maps a category to its mechanics: read-only is auto, mutating
// is confirm, destructive is dry run plus confirm; anything else is confirm.
func MechanicsFor(c Category) Mechanics {
	switch c {
	case CategoryReadOnly:
		return MechanicsAuto
	case CategoryDestructive:
		return MechanicsDryRunConfirm
	}
	return MechanicsConfirm
}

// isReadOnlyName is the MCP naming heuristic: a tool named get_, find_,
// list_, search_, read_ or fetch_ only reads.
func isReadOnlyName(name string) bool {
	for _, p := range [...]string{"get_", "find_", "list_", "search_", "read_", "fetch_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ToolCategory is the category of a call to a tool that is not exec-style.
// declared says whether config.yaml declares the tool; configured is its
// configured category (CategoryUnclassified when unset). The name-prefix
// heuristic applies only to undeclared tools, and only when turned on.
func ToolCategory(name string, declared bool, configured Category, readOnlyPrefixes bool) Category {
	if declared {
		switch configured {
		case CategoryReadOnly, CategoryMutating, CategoryDestructive:
			return configured
		}
		return CategoryUnclassified
	}
	if readOnlyPrefixes && isReadOnlyName(name) {
		return CategoryReadOnly
	}
	return CategoryUnclassified
}

// HeadlessDenial is the automatic-policy refusal of a call that needs a
// person when none is on the line (headless, or the request timed out).
func HeadlessDenial(c Category) string {
	word := "unclassified"
	switch c {
	case CategoryMutating, CategoryDestructive:
		word = string(c)
	case CategoryReadOnly:
		word = "read-only"
	}
	return "denied by automatic policy: " + word + " action requires explicit human confirmation"
}

// CommandRule is one entry of an exec-style tool's allowlist: a binary, or a
// binary plus subcommand words, matched on whole tokens. A read-only entry
// also names the flags it accepts (Flags): a read-only call is approved
// with nobody looking, so it may carry no flag its entry does not name.
type CommandRule struct {
	Tokens   []string
	Category Category
	// Flags are the flags a read-only entry accepts after its words: "-n"
	// or "--namespace" accepts the flag alone and with "=value"
	// ("--namespace=prod", its value as the next token is a plain word);
	// "--output=json" accepts that exact token. Empty: no flags at all.
	Flags []string
}

// String renders the rule as it is written in config.yaml.
func (r CommandRule) String() string { return strings.Join(r.Tokens, " ") }

// ParseCommandRule reads an allowlist entry such as "kubectl get", with the
// flags it accepts (a read-only entry only). A flag that loads code or
// configuration (LoaderFlag) is refused: a read-only entry never accepts
// one.
func ParseCommandRule(command, category string, flags []string) (CommandRule, error) {
	toks := strings.Fields(command)
	if len(toks) == 0 {
		return CommandRule{}, errors.New("command is empty")
	}
	for _, t := range toks {
		if i := strings.IndexAny(t, shellOperators); i >= 0 {
			return CommandRule{}, fmt.Errorf("command %q holds the shell character %q; list a binary and its subcommand words only", command, t[i])
		}
	}
	c, err := ParseCategory(category)
	if err != nil {
		return CommandRule{}, err
	}
	if c == CategoryUnclassified {
		return CommandRule{}, fmt.Errorf("command %q needs a category: read-only, mutating or destructive", command)
	}
	r := CommandRule{Tokens: toks, Category: c}
	if len(flags) > 0 && c != CategoryReadOnly {
		return CommandRule{}, fmt.Errorf("command %q is %s: flags applies to read-only entries only (a %s call is shown whole to the person who approves it); remove flags", command, c, c)
	}
	for _, f := range flags {
		f = strings.TrimSpace(f)
		if len(f) < 2 || f[0] != '-' || f == "--" || strings.ContainsAny(f, shellOperators+" \t") {
			return CommandRule{}, fmt.Errorf("flags: %q is not a flag; write it as the command takes it, for example -n, --namespace or --output=json", f)
		}
		if why := LoaderFlag(toks[0], f); why != "" {
			return CommandRule{}, fmt.Errorf("flags: %s %s, so a read-only entry never accepts it (a read-only call runs with nobody looking). Remove it; to allow such calls, list the command under a mutating entry so a person approves each one", f, why)
		}
		r.Flags = append(r.Flags, f)
	}
	return r, nil
}

// acceptsFlag reports whether a read-only rule accepts the flag token tok.
func (r CommandRule) acceptsFlag(tok string) bool {
	for _, f := range r.Flags {
		if tok == f || !strings.Contains(f, "=") && strings.HasPrefix(tok, f+"=") {
			return true
		}
	}
	return false
}

// isFlag reports whether a command token is a flag: it starts with '-'
// and is more than "-" (which commands read as standard input).
func isFlag(tok string) bool { return len(tok) > 1 && tok[0] == '-' }

// loaderFlags are the flags of well-known binaries that load code or
// configuration, or switch to other credentials or another server: given
// by an agent, they make a "read-only" call run what the agent chose. The
// generic ones apply to every binary.
var loaderFlags = map[string]map[string]string{
	"": {
		"--kubeconfig":  "loads a kubeconfig, which can name an exec credential plugin that runs",
		"--config":      "loads another configuration file",
		"--config-file": "loads another configuration file",
	},
	"kubectl": kubectlLoaders,
	"oc":      kubectlLoaders,
	"helm": {
		"--kube-context": "switches to another context's cluster and credentials", "--kube-token": "uses another bearer token",
		"--kube-apiserver": "talks to another API server", "--kube-as-user": "impersonates another user", "--kube-as-group": "impersonates another group",
		"--kube-ca-file": "trusts another certificate authority", "--kube-insecure-skip-tls-verify": "turns certificate checks off",
		"--registry-config": "loads other registry credentials", "--repository-config": "loads other repositories", "--repository-cache": "reads charts from another cache",
		"--post-renderer": "runs a program on the rendered manifests", "--post-renderer-args": "passes arguments to a post-renderer",
	},
	"git": {
		"-c": "sets configuration (core.pager, core.fsmonitor, core.sshCommand… run programs)", "--config-env": "sets configuration from the environment",
		"--exec-path": "runs git's programs from another directory", "-C": "runs in another repository, with its configuration and hooks",
		"--git-dir": "uses another repository, with its configuration and hooks", "--work-tree": "uses another work tree",
		"--upload-pack": "runs another program for the transfer", "--receive-pack": "runs another program for the transfer", "--exec": "runs another program for the transfer",
		"-O": "opens the matches with a program", "--open-files-in-pager": "opens the matches with a program",
		"--ext-diff": "runs the configured external diff program", "--textconv": "runs the configured text conversion programs",
	},
	"docker": dockerLoaders,
	"podman": dockerLoaders,
	"aws": {
		"--profile": "switches to another profile's credentials", "--endpoint-url": "talks to another endpoint", "--ca-bundle": "trusts another certificate authority",
		"--no-verify-ssl": "turns certificate checks off", "--cli-input-json": "reads the call from a file", "--cli-input-yaml": "reads the call from a file",
	},
	"gcloud": {
		"--configuration": "switches to another configuration", "--account": "switches to another account", "--impersonate-service-account": "impersonates a service account",
		"--access-token-file": "uses another access token", "--flags-file": "reads more flags from a file",
	},
	"terraform": terraformLoaders,
	"tofu":      terraformLoaders,
	"ssh":       {"-F": "loads another ssh configuration", "-o": "sets options (ProxyCommand, LocalCommand run programs)", "-i": "uses another identity", "-J": "jumps through another host", "-S": "uses another control socket"},
	"find": {
		"-exec": "runs a program", "-execdir": "runs a program", "-ok": "runs a program", "-okdir": "runs a program",
		"-delete": "deletes files", "-fprint": "writes a file", "-fprint0": "writes a file", "-fprintf": "writes a file", "-fls": "writes a file",
	},
}

var kubectlLoaders = map[string]string{
	"--context": "switches to another context's cluster and credentials", "--cluster": "switches to another cluster", "--user": "switches to another user's credentials",
	"--token": "uses another bearer token", "--server": "talks to another API server", "-s": "talks to another API server",
	"--as": "impersonates another user", "--as-group": "impersonates another group", "--as-uid": "impersonates another user",
	"--username": "uses other credentials", "--password": "uses other credentials",
	"--certificate-authority": "trusts another certificate authority", "--client-certificate": "uses another client certificate", "--client-key": "uses another client key",
	"--insecure-skip-tls-verify": "turns certificate checks off", "--tls-server-name": "accepts another server name",
	"--cache-dir": "reads discovery from another directory", "--profile": "writes a profile", "--profile-output": "writes a file",
	"-k": "runs kustomize on a directory", "--kustomize": "runs kustomize on a directory",
}

var dockerLoaders = map[string]string{
	"-c": "switches to another context", "--context": "switches to another context", "-H": "talks to another daemon", "--host": "talks to another daemon",
	"--tlscacert": "trusts another certificate authority", "--tlscert": "uses another client certificate", "--tlskey": "uses another client key",
}

var terraformLoaders = map[string]string{
	"-chdir": "runs in another directory, with its configuration and providers", "-var-file": "loads variables from a file",
	"-plugin-dir": "loads providers from another directory", "-backend-config": "loads backend configuration",
}

// LoaderFlag says why flag (with or without "=value") makes binary load
// code or configuration, or switch credentials or server ("" when it is
// not known to). The binary is matched by its base name ("/usr/bin/kubectl"
// is kubectl).
func LoaderFlag(binary, flag string) string {
	name, _, _ := strings.Cut(flag, "=")
	if i := strings.LastIndexByte(binary, '/'); i >= 0 {
		binary = binary[i+1:]
	}
	if why := loaderFlags[binary][name]; why != "" {
		return why
	}
	return loaderFlags[""][name]
}

// shellOperators are the characters a command string may not hold: with
// them a shell would run something other than the tokens the allowlist
// matched (a second command, a substitution, a redirection, a quoted word
// that unquotes to a subcommand).
const shellOperators = ";&|<>$`\\(){}'\"\n\r!*?[]~#"

// ErrNoCommand is returned by CommandTokens when the call names no command.
var ErrNoCommand = errors.New("no command given")

// CommandError is a malformed command argument.
type CommandError struct{ Msg string }

func (e *CommandError) Error() string { return e.Msg }

// CommandTokens extracts the tokens of an exec call's arguments.command,
// which is a string (split on white space) or an argv array of strings. A
// string that holds a shell operator or a quote is refused, so that what the
// allowlist matched is what would run; an argv array is taken as it is.
func CommandTokens(v any) ([]string, error) {
	switch cmd := v.(type) {
	case nil:
		return nil, ErrNoCommand
	case string:
		if i := strings.IndexAny(cmd, shellOperators); i >= 0 {
			return nil, &CommandError{Msg: fmt.Sprintf("the command string holds the shell character %q; Countersign matches whole words against the allowlist, so pass the command as an argv array of strings (for example [\"kubectl\", \"get\", \"pods\"]) instead", cmd[i])}
		}
		toks := strings.Fields(cmd)
		if len(toks) == 0 {
			return nil, ErrNoCommand
		}
		return toks, nil
	case []any:
		if len(cmd) == 0 {
			return nil, ErrNoCommand
		}
		toks := make([]string, len(cmd))
		for i, t := range cmd {
			s, ok := t.(string)
			if !ok {
				return nil, &CommandError{Msg: fmt.Sprintf("element %d of the argv array is not a string", i)}
			}
			toks[i] = s
		}
		if strings.TrimSpace(toks[0]) == "" {
			return nil, ErrNoCommand
		}
		return toks, nil
	case []string:
		return CommandTokens(toAny(cmd))
	}
	return nil, &CommandError{Msg: "must be a string (\"kubectl get pods\") or an argv array of strings"}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// CommandMatch is the verdict of an allowlist on one command.
type CommandMatch struct {
	// Rule is the longest allowlist entry the command starts with.
	Rule CommandRule
	// Category is Rule's category, made stricter by any longer entry that
	// extends Rule and whose extra words appear, in order, later in the
	// command: a flag placed before a subcommand ("kubectl -n x delete")
	// cannot downgrade it.
	Category Category
	// Unaccepted is, for a read-only verdict, the first flag the command
	// carries after Rule's words that Rule does not accept ("" when none):
	// the call must be refused (FlagRefusal).
	Unaccepted string
}

// MatchCommand matches tokens against rules on whole tokens; the longest
// match wins. ok is false when no rule matches: the command is not on the
// allowlist and must be refused, not asked about.
func MatchCommand(rules []CommandRule, tokens []string) (m CommandMatch, ok bool) {
	best := -1
	for i, r := range rules {
		if len(r.Tokens) == 0 || len(r.Tokens) > len(tokens) || !slices.Equal(r.Tokens, tokens[:len(r.Tokens)]) {
			continue
		}
		if best < 0 || len(r.Tokens) > len(rules[best].Tokens) ||
			(len(r.Tokens) == len(rules[best].Tokens) && severity(r.Category) > severity(rules[best].Category)) {
			best = i
		}
	}
	if best < 0 {
		return CommandMatch{}, false
	}
	m = CommandMatch{Rule: rules[best], Category: rules[best].Category}
	n := len(m.Rule.Tokens)
	rest := tokens[n:]
	for _, r := range rules {
		if len(r.Tokens) <= n || !slices.Equal(r.Tokens[:n], m.Rule.Tokens) {
			continue
		}
		if isSubsequence(r.Tokens[n:], rest) {
			m.Category = stricter(m.Category, r.Category)
		}
	}
	if m.Category == CategoryReadOnly {
		for _, t := range rest {
			if isFlag(t) && !m.Rule.acceptsFlag(t) {
				m.Unaccepted = t
				break
			}
		}
	}
	return m, true
}

// FlagRefusal is the refusal of a read-only call that carries a flag its
// allowlist entry does not accept (CommandMatch.Unaccepted), for tool.
func FlagRefusal(tool string, m CommandMatch) string {
	shown := m.Unaccepted
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	why := ""
	if w := LoaderFlag(m.Rule.Tokens[0], m.Unaccepted); w != "" {
		why = fmt.Sprintf(" %s %s, so no read-only entry ever accepts it.", shown, w)
	}
	accepted := "no flags"
	if len(m.Rule.Flags) > 0 {
		accepted = "only " + strings.Join(m.Rule.Flags, ", ")
	}
	return fmt.Sprintf("Access denied: %q is read-only, and a read-only call runs with nobody looking, so it takes only the flags its allowlist entry names (%s); %q is not one of them, so the call is refused, not asked about.%s To run it, ask an operator to add the flag to the entry's flags in config.yaml if it only changes what is shown, or to list the command under a mutating entry of %s so a person approves each call.",
		m.Rule.String(), accepted, shown, why, tool)
}

// isSubsequence reports whether want appears in have in order (not
// necessarily adjacent).
func isSubsequence(want, have []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// RequiredMissing returns the names listed in required that args lacks, in
// the order required gives them. A null value, or a string of only white
// space, counts as missing: a guessed or empty parameter is not an answer.
func RequiredMissing(required []string, args map[string]any) []string {
	var out []string
	for _, name := range required {
		v, ok := args[name]
		switch x := v.(type) {
		case nil:
			ok = false
		case string:
			if strings.TrimSpace(x) == "" {
				ok = false
			}
		}
		if !ok {
			out = append(out, name)
		}
	}
	return out
}

// Clarification is the seed's answer when required parameters are missing.
func Clarification(missing []string) string {
	return "REQUIRES_CLARIFICATION: Missing required parameters: " + strings.Join(missing, ", ")
}
