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
// binary plus subcommand words, matched on whole tokens.
type CommandRule struct {
	Tokens   []string
	Category Category
}

// String renders the rule as it is written in config.yaml.
func (r CommandRule) String() string { return strings.Join(r.Tokens, " ") }

// ParseCommandRule reads an allowlist entry such as "kubectl get".
func ParseCommandRule(command, category string) (CommandRule, error) {
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
	return CommandRule{Tokens: toks, Category: c}, nil
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
	return m, true
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
