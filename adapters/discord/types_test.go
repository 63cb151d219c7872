package discord

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/nodetest"
)

// TestGoldensFitThePublishedTypes type-checks every Discord golden file
// against Discord's published type definitions (discord-api-types, through
// testdata/node/check_goldens.ts and tsc --noEmit): a card that does not
// fit what Discord publishes (an unknown block or field, a missing one, a
// wrong style) fails here, not in a channel.
func TestGoldensFitThePublishedTypes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("golden files: %v, want at least one testdata/*.golden.json", err)
	}
	var docs []nodetest.Typed
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		typ := "DiscordGolden"
		if strings.HasSuffix(f, "_modal.golden.json") {
			typ = "DiscordModalGolden"
		}
		docs = append(docs, nodetest.Typed{Name: f, Type: typ, JSON: raw})
	}
	nodetest.TypeCheck(t, "check_goldens.ts", docs)
}
