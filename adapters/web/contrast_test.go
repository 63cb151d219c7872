package web

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestContrastWCAGAA computes the contrast ratio of every text colour on
// the background it is used on, in the light and the dark scheme of the
// embedded style sheet, and requires WCAG AA for normal text (4.5:1).
func TestContrastWCAGAA(t *testing.T) {
	css, err := assets.ReadFile("static/style.css")
	if err != nil {
		t.Fatal(err)
	}
	light, dark := schemes(t, string(css))
	pairs := [][2]string{
		{"text", "bg"}, {"text", "card"}, {"muted", "bg"}, {"muted", "card"}, {"accent", "card"}, {"accent", "bg"},
		{"accent-text", "accent"}, {"ok", "ok-bg"}, {"warn", "warn-bg"}, {"bad", "bad-bg"}, {"text", "code-bg"},
		{"muted", "code-bg"}, {"text", "old-bg"}, {"text", "new-bg"}, {"muted", "old-bg"}, {"muted", "new-bg"}, {"muted", "warn-bg"}, {"danger", "card"}, {"danger", "bg"},
	}
	for name, vars := range map[string]map[string]string{"light": light, "dark": dark} {
		for _, p := range pairs {
			fg, bg := vars[p[0]], vars[p[1]]
			if fg == "" || bg == "" {
				t.Fatalf("%s scheme: --%s or --%s is not defined", name, p[0], p[1])
			}
			if r := contrast(t, fg, bg); r < 4.5 {
				t.Errorf("%s scheme: --%s %s on --%s %s has contrast %.2f, below WCAG AA 4.5", name, p[0], fg, p[1], bg, r)
			}
		}
	}
	// The danger button: white text in the light scheme, --accent-text in the dark.
	if r := contrast(t, "#ffffff", light["danger"]); r < 4.5 {
		t.Errorf("light danger button: contrast %.2f, want at least 4.5 (WCAG AA)", r)
	}
	if r := contrast(t, dark["accent-text"], dark["danger"]); r < 4.5 {
		t.Errorf("dark danger button: contrast %.2f, want at least 4.5 (WCAG AA)", r)
	}
	// The kind badges' literal colours.
	for _, p := range [][2]string{{"#1d3a8a", "#e8eefc"}, {"#7a2e0b", "#fbe9dd"}, {"#b9ccff", "#1f2c4d"}, {"#ffc7a3", "#45250f"}} {
		if r := contrast(t, p[0], p[1]); r < 4.5 {
			t.Errorf("badge %s on %s: contrast %.2f, want at least 4.5 (WCAG AA)", p[0], p[1], r)
		}
	}
}

var varRE = regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{6})`)

// schemes reads the custom properties of the first :root block (light) and
// of the :root block inside the prefers-color-scheme: dark query.
func schemes(t *testing.T, css string) (light, dark map[string]string) {
	read := func(block string) map[string]string {
		m := map[string]string{}
		for _, v := range varRE.FindAllStringSubmatch(block, -1) {
			m[v[1]] = v[2]
		}
		return m
	}
	i := strings.Index(css, ":root {")
	d := strings.Index(css, "@media (prefers-color-scheme: dark)")
	if i < 0 || d < 0 {
		t.Fatal("style.css has no :root block or no dark scheme")
	}
	return read(css[i:d]), read(css[d : d+strings.Index(css[d:], "}\n}")])
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func luminance(t *testing.T, hex string) float64 {
	n, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	if err != nil || len(hex) != 7 {
		t.Fatalf("colour %q, want #rrggbb", hex)
	}
	ch := func(v uint64) float64 {
		c := float64(v) / 255
		if c <= 0.03928 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*ch(n>>16&0xff) + 0.7152*ch(n>>8&0xff) + 0.0722*ch(n&0xff)
}
