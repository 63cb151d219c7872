package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestUsageNamesEveryFlag reads each command's flags from its own --help
// (what the flag package prints) and checks that its line in the
// program's usage names every one of them, and no flag it does not take:
// the usage is written by hand, and a flag added to a command without it
// is one a newcomer never finds.
func TestUsageNamesEveryFlag(t *testing.T) {
	t.Parallel()
	helpFlag := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	usageFlag := regexp.MustCompile(`--([a-z][a-z-]*)`)
	lines := map[string]string{} // "store backup" -> its usage line
	for _, l := range strings.Split(usage, "\n") {
		rest, ok := strings.CutPrefix(l, "  countersign ")
		if !ok {
			continue
		}
		var words []string
		for _, w := range strings.Fields(rest) {
			if strings.HasPrefix(w, "[") || strings.HasPrefix(w, "--") || strings.ToUpper(w) == w {
				break
			}
			words = append(words, w)
		}
		lines[strings.Join(words, " ")] = rest
	}
	if len(lines) < 19 {
		t.Fatalf("read %d command lines from the usage, want every command's (19 or more): %q", len(lines), lines)
	}
	for cmd, line := range lines {
		_, errOut, err := runWith(t, nil, append(strings.Fields(cmd), "--help")...)
		if err != nil {
			t.Errorf("countersign %s --help: err = %v, want nil", cmd, err)
			continue
		}
		var takes, named []string
		for _, m := range helpFlag.FindAllStringSubmatch(errOut, -1) {
			takes = append(takes, m[1])
		}
		for _, m := range usageFlag.FindAllStringSubmatch(line, -1) {
			named = append(named, m[1])
		}
		if len(takes) == 0 {
			t.Errorf("countersign %s --help printed no flags: %q", cmd, errOut)
		}
		slices.Sort(takes)
		slices.Sort(named)
		if !slices.Equal(takes, slices.Compact(named)) {
			t.Errorf("usage line %q names flags %v, want %v (what countersign %s takes)", line, slices.Compact(named), takes, cmd)
		}
	}
}

// TestAPIKey: the flag wins, then the variables in the order given; white
// space around a key (a newline pasted with it) is no part of it, and a
// variable holding only white space is no key.
func TestAPIKey(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": " \n", "B": "csk_b\n", "C": "csk_c"}
	getenv := func(k string) string { return env[k] }
	for _, tt := range []struct {
		flag string
		envs []string
		want string
	}{
		{" csk_flag ", []string{"B"}, "csk_flag"},
		{"", []string{"A", "B", "C"}, "csk_b"},
		{"", []string{"C", "B"}, "csk_c"},
		{"", []string{"A"}, ""},
		{"", nil, ""},
	} {
		if got := apiKey(tt.flag, getenv, tt.envs...); got != tt.want {
			t.Errorf("apiKey(%q, %v) = %q, want %q", tt.flag, tt.envs, got, tt.want)
		}
	}
}
