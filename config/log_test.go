package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLogHandler: log.format picks text or JSON lines and log.level drops
// what is below it, as read from the file.
func TestLogHandler(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		yaml      string
		json      bool
		debugKept bool
	}{
		{"", false, false},
		{"log:\n  format: json\n", true, false},
		{"log:\n  format: json\n  level: debug\n", true, true},
		{"log:\n  level: warn\n", false, false},
	} {
		c, err := Parse([]byte(tt.yaml), t.TempDir())
		if err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		var buf bytes.Buffer
		log := slog.New(c.Log.Handler(&buf))
		log.Debug("d-line")
		log.Warn("w-line", "k", "v")
		out := buf.String()
		if got := strings.Contains(out, "d-line"); got != tt.debugKept {
			t.Errorf("%q: debug line kept = %v, want %v:\n%s", tt.yaml, got, tt.debugKept, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		var line map[string]any
		isJSON := json.Unmarshal([]byte(last), &line) == nil
		if isJSON != tt.json || !strings.Contains(last, "w-line") {
			t.Errorf("%q: warn line %q: JSON = %v, want %v, with the message w-line", tt.yaml, last, isJSON, tt.json)
		}
		if tt.json && line["k"] != "v" {
			t.Errorf("%q: warn line's k = %v, want v", tt.yaml, line["k"])
		}
	}
}
