package countersign

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestTracingStaysAtTheEdges: OpenTelemetry is imported where spans are
// made (bot's call path, bot/chat's decision, adapters/tracing, cmd) and
// never by the rules, the storage contract or the domain: policy, kv,
// memory, approvals, receipt and client (and the packages under them) hold
// no tracing code, so a decision never depends on it.
func TestTracingStaysAtTheEdges(t *testing.T) {
	for _, root := range []string{"policy", "kv", "memory", "approvals", "receipt", "client"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			p, err := build.ImportDir(path, 0)
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			} else if err != nil {
				return err
			}
			for _, imp := range p.Imports {
				if strings.HasPrefix(imp, "go.opentelemetry.io/") {
					t.Errorf("%s imports %s: tracing belongs to the edges and the call path (bot, adapters/tracing), not to %s", filepath.ToSlash(path), imp, root)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", root, err)
		}
	}
}
