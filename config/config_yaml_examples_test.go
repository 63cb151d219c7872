package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// commentedExample is one commented-out example of config.yaml: the lines
// (0-based, end exclusive) that uncomment to a key the config accepts.
type commentedExample struct {
	path       string // the key path, as configuration.md writes it: tools[].rules
	start, end int
	col        int // the column of its '#'
}

var (
	yamlKeyLine    = regexp.MustCompile(`^(\s*)(- )?([a-z_]+):(\s|$)`)
	commentKeyLine = regexp.MustCompile(`^(\s*)# ([a-z_]+):(\s|$)`)
)

// commentedExamples finds config.yaml's commented-out examples: a comment
// whose text is `key:` where key, at that place in the file, is a key the
// config accepts, with the comment lines under it that are indented
// further. Prose comments ("# queued: answered after ...") name no key and
// are skipped.
func commentedExamples(lines []string, known map[string]bool) []commentedExample {
	type frame struct {
		indent int
		key    string
	}
	var stack []frame
	pathAt := func(indent int, key string) string {
		p := ""
		for _, f := range stack {
			if f.indent >= indent {
				break
			}
			if f.key == "[]" {
				p += "[]"
			} else {
				p = join(p, f.key)
			}
		}
		return join(p, key)
	}
	var out []commentedExample
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := commentKeyLine.FindStringSubmatch(line); m != nil {
			col := len(m[1])
			path := pathAt(col, m[2])
			if !known[path] {
				continue
			}
			ex := commentedExample{path: path, start: i, col: col}
			j := i + 1
			for ; j < len(lines); j++ {
				l := lines[j]
				if len(l) < col+3 || l[:col] != strings.Repeat(" ", col) || l[col:col+3] != "#  " {
					break
				}
			}
			ex.end = j
			out = append(out, ex)
			continue
		}
		m := yamlKeyLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		if m[2] != "" {
			stack = append(stack, frame{indent, "[]"})
			indent += 2
		}
		stack = append(stack, frame{indent, m[3]})
	}
	return out
}

// uncomment returns config.yaml with ex uncommented in place, dropping a
// set key of the same name beside it (the example shows another value of
// that key), and the key replaced when one is named.
func uncomment(lines []string, ex commentedExample, replaced string) string {
	out := append([]string(nil), lines...)
	key := strings.TrimSpace(strings.SplitN(out[ex.start][ex.col+2:], ":", 2)[0])
	for i := ex.start; i < ex.end; i++ {
		l := out[i]
		out[i] = l[:ex.col] + strings.TrimPrefix(l[ex.col:], "# ")
		if strings.TrimSpace(out[i]) == "#" {
			out[i] = ""
		}
	}
	// The mapping ex sits in: the lines around it indented at least as far.
	lo, hi := ex.start, ex.end
	inMapping := func(l string) bool {
		t := strings.TrimLeft(l, " ")
		return t == "" || strings.HasPrefix(t, "#") || len(l)-len(t) >= ex.col
	}
	for lo > 0 && inMapping(out[lo-1]) {
		lo--
	}
	for hi < len(out) && inMapping(out[hi]) {
		hi++
	}
	for i := lo; i < hi; i++ {
		if i >= ex.start && i < ex.end {
			continue
		}
		l := out[i]
		pad := strings.Repeat(" ", ex.col)
		if strings.HasPrefix(l, pad+key+":") || replaced != "" && strings.HasPrefix(l, pad+replaced+":") {
			out[i] = ""
			for k := i + 1; k < hi && len(out[k])-len(strings.TrimLeft(out[k], " ")) > ex.col; k++ {
				out[k] = ""
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestConfigYAMLCommentedExamplesLoad: every commented-out example of the
// shipped config.yaml loads when a reader uncomments it in place (with the
// examples its comment says it needs), so none teaches a key, a value or a
// shape that start-up refuses.
func TestConfigYAMLCommentedExamplesLoad(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	configKeyPaths(reflect.TypeOf(Config{}), "", &keys)
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	lines := strings.Split(string(b), "\n")
	examples := commentedExamples(lines, known)
	// What an example needs beside it, as its comment says ("Needs web.oidc
	// below"), by key path.
	needs := map[string][]string{
		"break_glass":                 {"web.oidc"},
		"tools[].step_up":             {"web.oidc"},
		"web.passkeys":                {"web.oidc"},
		"tools[].rules":               {"groups", "slack"},
		"approvals.reminder_channel":  {"email"},
		"approvals.escalation_oncall": {"oncall"},
	}
	// A key an example replaces, not sits beside ("...or inline, as here").
	replaces := map[string]string{"memory.slot_schema": "slots"}
	// Examples that show what start-up refuses, on purpose.
	refused := map[string]bool{"audit.anchor.channel": true}
	byPath := map[string]commentedExample{}
	for _, ex := range examples {
		byPath[ex.path] = ex
	}
	for _, want := range []string{"groups", "oncall", "break_glass", "gateway", "slack", "discord", "teams", "email", "principals", "scim", "web.oidc", "web.passkeys", "mcp.oauth", "tools[].rules", "tools[].grants"} {
		if _, ok := byPath[want]; !ok {
			t.Errorf("config.yaml has no commented-out %s example (found %d examples); the file changed shape", want, len(examples))
		}
	}
	for _, ex := range examples {
		t.Run(ex.path, func(t *testing.T) {
			t.Parallel()
			text := uncomment(lines, ex, replaces[ex.path])
			for _, n := range needs[ex.path] {
				dep, ok := byPath[n]
				if !ok {
					t.Fatalf("%s needs %s, and config.yaml has no such example", ex.path, n)
				}
				text = uncomment(strings.Split(text, "\n"), dep, "")
			}
			dir := t.TempDir()
			if err := os.WriteFile(dir+"/slots.json", []byte(`{"slots": [{"name": "allergy", "multi": true}]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Parse([]byte(text), dir)
			switch {
			case refused[ex.path] && err == nil:
				t.Errorf("config.yaml:%d: %s loads; its comment says it is refused", ex.start+1, ex.path)
			case !refused[ex.path] && err != nil:
				t.Errorf("config.yaml:%d-%d (%s) uncommented does not load: %v\n%s", ex.start+1, ex.end, ex.path, err, strings.Join(strings.Split(text, "\n")[ex.start:ex.end], "\n"))
			}
		})
	}
}
