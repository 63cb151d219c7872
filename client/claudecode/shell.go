package claudecode

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DefaultReadOnlyTools are Claude Code's tools that only read, or only
// talk to the person at the terminal, or keep the session's own
// bookkeeping: the hook allows them without asking Countersign. The names
// are those of Claude Code's tools reference; a subagent's (Agent) own tool
// calls go through the hook one by one.
func DefaultReadOnlyTools() []string {
	return []string{
		"Read", "Grep", "Glob", "LSP", "ToolSearch", "ListMcpResourcesTool", "ReadMcpResourceTool", "WaitForMcpServers",
		"TodoWrite", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "TaskOutput", "TaskStop", "CronList", "ListAgents",
		"AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "Agent",
	}
}

// DefaultReadOnlyCommands are shell commands that only read: a Bash call
// that is exactly one of them (one simple command, no shell syntax, its
// first words these) passes without asking.
func DefaultReadOnlyCommands() []string {
	return []string{
		"ls", "pwd", "cat", "head", "tail", "wc", "grep", "echo", "date", "which",
		"git status", "git diff", "git log", "git show", "git blame", "git rev-parse", "git branch --show-current",
	}
}

// DefaultDestructivePatterns are the regular expressions (RE2) of shell
// commands that destroy: recursive rm, force pushes and remote deletions,
// hard resets, forced cleans, SQL DROP/TRUNCATE/DELETE FROM, disk
// formatting and overwriting, kubectl delete, terraform destroy, find
// -delete. A command any of them matches is confirmed as the destructive
// tool: a person reviews it as a dry run, and no standing grant covers it.
func DefaultDestructivePatterns() []string {
	return []string{
		`\brm\s(?:.*\s)?(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?:\s|$)`,
		`\bgit\s(?:.*\s)?push\s(?:.*\s)?(?:--force\S*|-[a-zA-Z]*f[a-zA-Z]*|--delete|-d|--mirror|--prune|\+\S+|:\S+)(?:\s|$)`,
		`\bgit\s(?:.*\s)?reset\s(?:.*\s)?--hard(?:\s|$)`,
		`\bgit\s(?:.*\s)?clean\s(?:.*\s)?-[a-zA-Z]*f`,
		`\bgit\s(?:.*\s)?branch\s(?:.*\s)?-D(?:\s|$)`,
		`(?i)\b(?:drop|truncate)\s+(?:table|database|schema|index|view)\b`,
		`(?i)\bdelete\s+from\b`,
		`\b(?:mkfs(?:\.\w+)?|shred|wipefs)\b`,
		`\bdd\s(?:.*\s)?of=`,
		`\bkubectl\s(?:.*\s)?delete\b`,
		`\bterraform\s(?:.*\s)?destroy\b`,
		`\bfind\s(?:.*\s)?-delete\b`,
	}
}

// CompilePatterns compiles destructive patterns; the error names the
// first that is not a regular expression.
func CompilePatterns(ps []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(ps))
	for i, p := range ps {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("[%d] is empty", i)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("[%d] %q is not a regular expression (RE2 syntax): %v", i, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// shellSyntax are the characters that make a command more than one simple
// command a reader can take at its word: separators, pipes, redirections,
// substitutions, escapes, groups and line breaks.
const shellSyntax = ";&|<>$`\\(){}\n\r"

// CheckCommandEntry says whether s can be a read-only command entry: words
// without shell syntax or quotes.
func CheckCommandEntry(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("is empty")
	}
	if i := strings.IndexAny(s, shellSyntax+`'"`); i >= 0 {
		return fmt.Errorf("%q holds the shell character %q; list a command and its first words only", s, s[i])
	}
	return nil
}

// readOnlyCommand returns the entry of entries that cmd is plainly: one
// simple command (no shell syntax at all) whose first words are the
// entry's, with no option that writes. Anything else is not read-only.
func readOnlyCommand(cmd string, entries []string) (string, bool) {
	if strings.ContainsAny(cmd, shellSyntax) {
		return "", false
	}
	words := strings.Fields(cmd)
	if len(words) == 0 {
		return "", false
	}
	// Options that make a listed command write or run something (git diff
	// --output=FILE, an external diff program).
	writingFlags := []string{"--output", "--ext-diff", "--exec", "--upload-pack"}
	for _, w := range words {
		for _, f := range writingFlags {
			if strings.HasPrefix(w, f) {
				return "", false
			}
		}
	}
	for _, e := range entries {
		ew := strings.Fields(e)
		if len(ew) > 0 && len(ew) <= len(words) && slices.Equal(ew, words[:len(ew)]) {
			return e, true
		}
	}
	return "", false
}

// destructive reports whether any pattern matches cmd.
func destructive(cmd string, patterns []*regexp.Regexp) bool {
	for _, re := range patterns {
		if re.MatchString(cmd) {
			return true
		}
	}
	return false
}
